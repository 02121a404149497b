"""A reward function for verl and TRL that asks `stitch serve` (POST /v1/reward).

Standard library only. The request id is derived from the sample itself (task, skill and the
code), so a retry after a 429, a 503, a 504 or a dropped connection is the same request: the
service runs it once and answers every repeat from its store; identical completions in a batch
share one verification.

verl (datasets from `stitch export`, whose extra_info carries task_id and skill):
    custom_reward_function.path=examples/verl_reward.py
    custom_reward_function.name=compute_score           # reward_model.reward_manager=naive
    custom_reward_function.name=compute_score_batch     # reward_model.reward_manager=batch
TRL (GRPOTrainer passes the dataset's other columns, extra_info among them, as kwargs):
    GRPOTrainer(..., reward_funcs=[verl_reward.trl_reward])
An opt sample's previous_code and feedback come from extra_info (`stitch export --skill opt`
writes both; empty where a dataset lacks them: only the rubric judge reads them).
Settings: STITCH_SERVE_URL (default http://127.0.0.1:8421), STITCH_SERVE_TOKEN.
Try it:   python3 examples/verl_reward.py TASK_ID SOLUTION_FILE
"""
import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

URL = os.environ.get("STITCH_SERVE_URL", "http://127.0.0.1:8421").rstrip("/")
TOKEN = os.environ.get("STITCH_SERVE_TOKEN", "")
FENCE = re.compile(r"^ {0,3}(`{3,})[^\n`]*\n(.*?)^ {0,3}\1`*[ \t]*$", re.M | re.S)


def extract_code(text):
    """The one fenced block of the answer (the whole text when it has no fence); None for two."""
    blocks = [m.group(2) for m in FENCE.finditer(text)]
    if len(blocks) > 1:
        return None
    return blocks[0] if blocks else text


def stitch_reward(task_id, code, skill="gen", previous_code=None, feedback=None, attempts=50):
    """The reward breakdown (docs/reward.md) for one solution; raises after `attempts` tries."""
    req = {"task": task_id, "code": code, "skill": skill}
    if skill == "opt":
        req.update(previous_code=previous_code or "", feedback=feedback or "")
    # The id names the content: the same sample always gets the same id (and the same answer).
    digest = hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()
    req["id"] = "rl-" + digest[:40]
    body = json.dumps(req).encode()
    headers = {"Content-Type": "application/json"}
    if TOKEN:
        headers["Authorization"] = "Bearer " + TOKEN
    for attempt in range(attempts):
        wait = min(2.0 * (attempt + 1), 30.0)
        try:
            r = urllib.request.Request(URL + "/v1/reward", data=body, headers=headers)
            with urllib.request.urlopen(r, timeout=900) as answer:
                return json.load(answer)["reward"]
        except urllib.error.HTTPError as e:
            if e.code not in (429, 503, 504):
                raise RuntimeError(f"stitch serve: {e.code} {e.read()[:300]!r}") from None
            if e.code == 429:
                wait = float(e.headers.get("Retry-After", wait))
            elif e.code == 504:
                wait = 0  # the work goes on; the same id waits for it again
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # the service restarts or drains: the same id is safe to send again
        time.sleep(wait)
    raise RuntimeError(f"stitch serve: no answer for {req['id']} after {attempts} attempts")


def _score(solution_str, extra_info):
    info = extra_info or {}
    code = extract_code(solution_str)
    if not code or not code.strip():
        return 0.0  # no single solution file: nothing to verify
    r = stitch_reward(info["task_id"], code, info.get("skill", "gen"),
                      info.get("previous_code"), info.get("feedback"))
    return float(r["reward"])


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl, one sample at a time (the naive reward manager)."""
    return _score(solution_str, extra_info)


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
    """verl's batch reward manager: the whole batch at once, so the service's workers all run."""
    with ThreadPoolExecutor(max_workers=64) as pool:
        return list(pool.map(_score, solution_strs, extra_infos))


def trl_reward(completions, extra_info, **kwargs):
    """TRL: completions are strings or chat messages; extra_info is the dataset's column."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    with ThreadPoolExecutor(max_workers=64) as pool:
        return list(pool.map(_score, texts, extra_info))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: verl_reward.py TASK_ID SOLUTION_FILE")
    with open(sys.argv[2]) as f:
        print(json.dumps(stitch_reward(sys.argv[1], f.read())))
