#!/usr/bin/env bash
# `stitch import kernelbench` on CPU PyTorch, and the verifier on imported tasks through the host
# backend, judged against the PyTorch program drawing each verify's seeds (the default: no tensor
# on disk) or against stored inputs and outputs (--store-seeds): the four test programs of
# tests/kernelbench/ imported both ways and their hand-written C solutions verified; a wrong and a
# lazy solution caught; the live reference's params checked, its process and files gone after;
# stored baselines turned into speedups; damaged data files and programs that cannot be imported
# refused with a message naming the cause.
source "$(dirname "$0")/../lib.sh"

if ! torch_python; then
	echo "SKIP: no python3 with torch here (scripts/bootstrap --tests installs python3-torch)"
	exit 77
fi
KB=$STITCH_SRC/tests/kernelbench
ROOT=$WORK/tasks

# 1. The four programs: import (two storing their seeds, two not), then verify the host solution
# against the import.
for name in mlp cnn transformer_block lstm; do
	start=$(date +%s.%N)
	store=
	case $name in mlp | cnn) store=--store-seeds ;; esac
	"$STITCH" import kernelbench "$KB/$name.py" --out "$ROOT/kb/level3/$name" --level 3 $store \
		>"$WORK/import-$name.out" 2>"$WORK/import-$name.err"
	rc=$?
	took=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
	check "$name: import exits 0 ($rc: $(tail -n 2 "$WORK/import-$name.err"))" [ "$rc" -eq 0 ]
	echo "import $name: ${took} s"
	check "$name: import says what it made" grep -q "imported level3/$name" "$WORK/import-$name.out"
	for f in task.json model.py ${store:+data/params.safetensors data/seed1.safetensors \
		data/seed3.safetensors data/check.safetensors}; do
		check "$name: import wrote $f" [ -s "$ROOT/kb/level3/$name/$f" ]
	done
	if [ -z "$store" ]; then
		check "$name: no tensor on disk without --store-seeds" [ ! -e "$ROOT/kb/level3/$name/data" ]
	fi
	verify "$WORK/$name.json" "$ROOT/kb/level3/$name" "$KB/solutions/$name.c"
	check "$name: the host solution is correct against the import ($RC: $(field "$WORK/$name.json" reason))" \
		[ "$RC" -eq 0 ]
	check "$name: verdict ok" [ "$(field "$WORK/$name.json" status)" = ok ]
done
# The task tells the agents the program and the params by name, and nothing of the data.
check "description carries the PyTorch source" grep -q 'class Model' "$ROOT/kb/level3/mlp/task.json"
check "description names the params in order" \
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["description"]; i=d.index("fc1.weight"); j=d.index("fc2.weight"); sys.exit(0 if i < j else 1)' \
	"$ROOT/kb/level3/mlp/task.json"
check "BatchNorm in train mode is said" grep -q 'batch' "$ROOT/kb/level3/cnn/task.json"
# The agents' prompts for an imported task: the PyTorch program, and no CUDA reference to copy.
STITCH_TASKS=$ROOT/kb "$STITCH" export --skill gen --out "$WORK/kb.jsonl" 2>/dev/null
check "export writes a prompt per imported task" [ "$(wc -l <"$WORK/kb.jsonl")" -eq 4 ]
check "the prompt carries the PyTorch program and says to write no PyTorch" python3 - "$WORK/kb.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = all("class Model" in json.dumps(r["prompt"]) and "no PyTorch, no Python" in json.dumps(r["prompt"])
         for r in rows)
sys.exit(0 if ok else 1)
EOF

# 2. A small program for the harness checks.
T=$ROOT/kb/level1/linear_relu
"$STITCH" import kernelbench "$KB/linear_relu.py" --out "$T" >/dev/null 2>"$WORK/lr.err"
check "linear_relu imports ($(tail -n 1 "$WORK/lr.err"))" [ -f "$T/task.json" ]
check "level from the path, else 1: tier 1" grep -q '"tier": 1' "$T/task.json"
verify "$WORK/lr.json" "$T" "$KB/solutions/linear_relu.c"
check "linear_relu: correct" [ "$RC" -eq 0 ]
check "every seed is run" python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if len(v["correctness"]) == 3 else 1)' "$WORK/lr.json"
check "task.json names the program and the params' digest, and no file of tensors" python3 - "$T/task.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
sys.exit(0 if d["reference"] == "model.py" and d["seeds"] == 3 and len(d["params_sha256"]) == 64
         and "params" not in d else 1)
EOF
check "the PyTorch program drew 3 seeds and the check seed, its params checked" python3 - "$WORK/lr.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["reference_runner"]
sys.exit(0 if r["seeds"] == 3 and len(r["draw_s"]) == 4 and r["params_checked"] and
         r["device"] == "cpu" else print(r) or 1)
EOF
# More params than inputs and outputs could have (KernelBench's level-3 networks hold up to 626):
# judged like any task, and an answer that writes nothing is incorrect, not passed over.
TD=$ROOT/kb/level3/deep_residual
"$STITCH" import kernelbench "$KB/many_params/deep_residual.py" --out "$TD" --level 3 >/dev/null 2>"$WORK/deep.err"
check "80 params import ($(tail -n 1 "$WORK/deep.err"))" python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1]))["params"]) == 80 else 1)' "$TD/task.json"
verify "$WORK/deep.json" "$TD" "$KB/solutions/deep_residual.c"
check "80 params: the solution is ok ($RC: $(tail -n 1 "$WORK/deep.json.err"))" [ "$RC" -eq 0 ]
sed 's/for (int l = 0; l < c->depth; l++) {/for (int l = 0; l < 0; l++) {/; s/memcpy(y, in\[0\].data.*/(void)y;/' \
	"$KB/solutions/deep_residual.c" >"$WORK/deep_nothing.c"
verify "$WORK/deep0.json" "$TD" "$WORK/deep_nothing.c"
check "80 params: an answer that writes nothing is incorrect ($RC)" [ "$RC" -eq 1 ]

# Verifies under other seeds judge on other inputs, under the same --seed on the same (FAST
# passes --seed 7; without --seed every verify's seed base is secret and new).
mkdir -p "$WORK/reftmp" && chmod 711 "$WORK" && chmod 1777 "$WORK/reftmp" # runners traverse it
for s in 7 8 7; do
	TMPDIR=$WORK/reftmp verify "$WORK/lr$s.json" "$T" "$KB/solutions/linear_relu.c" --seed $s \
		--dump "$WORK/d$s-$(ls "$WORK" | grep -c '^d[78]-')"
done
check "--seed 7 twice: the same inputs; --seed 8: others" python3 - "$WORK/d7-0" "$WORK/d8-1" "$WORK/d7-2" <<'EOF'
import json, struct, sys
def x0(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    lo, hi = json.loads(b[8:8 + n])["x0"]["data_offsets"]
    return b[8 + n + lo:8 + n + hi]
a, b, c = (x0(p) for p in sys.argv[1:])
sys.exit(0 if a and len(a) == len(b) and a != b and a == c else 1)
EOF
check "the live reference leaves no file behind" [ -z "$(ls -A "$WORK/reftmp")" ]
check "the live reference leaves no process behind" sh -c "! pgrep -f 'kb_[r]eference.py $T' >/dev/null"
# The warm reference server: a verify that finds none draws with a helper of its own and starts
# one; the next attaches to a child of it (torch already imported), on the same seeds under the
# same --seed; the child is gone after the verify, the server stays until its idle limit.
SRV=$WORK/run
mkdir -m 700 "$SRV"
srv_verify() { XDG_RUNTIME_DIR=$SRV STITCH_REF_SERVER=1 STITCH_REF_SERVER_IDLE=${IDLE:-120} \
	TMPDIR=$WORK/reftmp verify "$@"; }
server_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reference_runner"]["server"])' "$1"; }
# ok_via VERDICT True|False: the verify passed, through the server or with a helper of its own
ok_via() { [ "$RC" -eq 0 ] && [ "$(server_of "$1")" = "$2" ]; }
CUDA_VISIBLE_DEVICES=3 srv_verify "$WORK/srv1.json" "$T" "$KB/solutions/linear_relu.c" --seed 7 --dump "$WORK/ds1"
check "no server yet: ok with a helper of its own ($RC, server $(server_of "$WORK/srv1.json"))" \
	ok_via "$WORK/srv1.json" False
sock_up() { ls "$SRV"/stitch-ref-*/ref-*.sock >/dev/null 2>&1; }
check "the first verify started a server" wait_for 120 sock_up
check "in a folder only this user may enter" \
	sh -c "[ \"\$(stat -c %a \"$SRV\"/stitch-ref-*)\" = 700 ]"
CUDA_VISIBLE_DEVICES=4 srv_verify "$WORK/srv2.json" "$T" "$KB/solutions/linear_relu.c" --seed 7 --dump "$WORK/ds2"
check "the next verify attaches to it: ok ($RC, server $(server_of "$WORK/srv2.json"))" \
	ok_via "$WORK/srv2.json" True
# The program runs on the verify's GPUs (a serve slot's, else the verify's own), not on those of
# the verify that started the server.
visible_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reference_runner"].get("visible_devices"))' "$1"; }
check "a helper of its own sees the verify's CUDA_VISIBLE_DEVICES ($(visible_of "$WORK/srv1.json"))" \
	[ "$(visible_of "$WORK/srv1.json")" = 3 ]
check "the server's child sees its verify's, not the server's ($(visible_of "$WORK/srv2.json"))" \
	[ "$(visible_of "$WORK/srv2.json")" = 4 ]
check "through the server, --seed 7 draws the same inputs" python3 - "$WORK/ds1" "$WORK/ds2" <<'EOF'
import json, struct, sys
def x0(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    lo, hi = json.loads(b[8:8 + n])["x0"]["data_offsets"]
    return b[8 + n + lo:8 + n + hi]
a, b = (x0(p) for p in sys.argv[1:])
sys.exit(0 if a and a == b else 1)
EOF
servers() { pgrep -fc "kb_[r]eference.py --serve $SRV" || true; }
check "the server's child is gone, the server stays ($(servers) processes)" [ "$(servers)" -eq 1 ]
check "no file left by the server's child" [ -z "$(ls -A "$WORK/reftmp")" ]
sed 's/acc > 0 ? (float)acc : 0.0f/(float)acc/' "$KB/solutions/linear_relu.c" >"$WORK/norelu0.c"
srv_verify "$WORK/srv3.json" "$T" "$WORK/norelu0.c"
check "a wrong solution through the server is incorrect ($RC)" [ "$RC" -eq 1 ]
chmod 755 "$SRV"/stitch-ref-*
srv_verify "$WORK/srv4.json" "$T" "$KB/solutions/linear_relu.c"
check "a server folder others may enter is not used ($RC, server $(server_of "$WORK/srv4.json"))" \
	ok_via "$WORK/srv4.json" False
chmod 700 "$SRV"/stitch-ref-*
# A server killed outright leaves its socket: the next verify finds nobody there, draws with a
# helper of its own and starts a new server, which the verify after it uses.
stale=$(cat "$SRV"/stitch-ref-*/ref-*.sock.pid)
kill -9 "$stale"
gone() { [ "$(servers)" -eq 0 ]; }
check "a server killed outright is gone" wait_for 10 gone
check "and its socket stays behind" sock_up
srv_verify "$WORK/srv5.json" "$T" "$KB/solutions/linear_relu.c"
check "a stale socket: ok with a helper of its own ($RC, server $(server_of "$WORK/srv5.json"): $(tail -n 1 "$WORK/srv5.json.err"))" \
	ok_via "$WORK/srv5.json" False
# a new server's pid beside the socket, written once it serves (an inode number was no proof: on
# the CI machine the check by inode failed twice while the next verify did attach to a new server)
replaced() { sock_up && [ -n "$(cat "$SRV"/stitch-ref-*/ref-*.sock.pid 2>/dev/null)" ] &&
	[ "$(cat "$SRV"/stitch-ref-*/ref-*.sock.pid)" != "$stale" ]; }
check "and a new server took the socket's place ($(tail -n 2 "$SRV"/stitch-ref-*/ref-*.log 2>/dev/null | tr '\n' ' '))" wait_for 300 replaced
srv_verify "$WORK/srv6.json" "$T" "$KB/solutions/linear_relu.c"
check "which the next verify attaches to ($RC, server $(server_of "$WORK/srv6.json"))" \
	ok_via "$WORK/srv6.json" True
SOCK=$(ls "$SRV"/stitch-ref-*/ref-*.sock)
kill "$(cat "$SOCK.pid")"
check "the server ends when asked" wait_for 10 gone
check "and takes its socket with it" sh -c "! ls \"$SRV\"/stitch-ref-*/*.sock* 2>/dev/null"
# A listener that never answers (a server gone wrong): the verify gives the attach a few seconds,
# then draws with a helper of its own and removes that socket.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); time.sleep(300)' "$SOCK" &
MUTE=$!
check "a listener that never answers is up" wait_for 10 sock_up
srv_verify "$WORK/srv7.json" "$T" "$KB/solutions/linear_relu.c"
check "a server that does not answer: ok with a helper of its own ($RC, server $(server_of "$WORK/srv7.json"))" \
	ok_via "$WORK/srv7.json" False
check "and its socket is removed: the listener's is gone ($(ls "$SRV"/stitch-ref-*/ 2>/dev/null | tr '\n' ' '))" \
	wait_for 10 sh -c "[ ! -e '$SOCK' ] || [ -s '$SOCK.pid' ]"
kill "$MUTE"
wait "$MUTE" 2>/dev/null
stale=none
check "and a new server takes its place" wait_for 300 replaced
srv_verify "$WORK/srv8.json" "$T" "$KB/solutions/linear_relu.c"
check "which the next verify attaches to ($RC, server $(server_of "$WORK/srv8.json"))" ok_via "$WORK/srv8.json" True
kill "$(cat "$SOCK.pid")"
check "that server ends when asked" wait_for 10 gone

# No torch where the verify runs: an environment error that says what to do.
printf '#!/bin/sh\nexec "%s" -S "$@"\n' "$STITCH_PYTHON" >"$WORK/notorch" && chmod +x "$WORK/notorch"
STITCH_PYTHON=$WORK/notorch verify "$WORK/notorch.json" "$T" "$KB/solutions/linear_relu.c"
check "no torch at verify time is an environment error ($RC)" [ "$RC" -eq 3 ]
check "no torch at verify time says --store-seeds" grep -q "no PyTorch.*--store-seeds" "$WORK/notorch.json.err"
check "no reference baseline on an imported task" python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if "reference_ms" not in v["baselines"] else 1)' "$WORK/lr.json"

# A wrong solution (no ReLU) fails on the stored outputs.
sed 's/acc > 0 ? (float)acc : 0.0f/(float)acc/' "$KB/solutions/linear_relu.c" >"$WORK/norelu.c"
verify "$WORK/norelu.json" "$T" "$WORK/norelu.c"
check "a wrong solution is incorrect ($RC)" [ "$RC" -eq 1 ]
check "incorrect names the output" grep -q '"reason": ".*y0' "$WORK/norelu.json"

# Right on the seeds it was checked on, then lazy: the timed call checked on the kept-back seed
# catches it.
verify "$WORK/lazy.json" "$T" "$KB/exploits/lazy.c"
check "a lazy solution is caught ($RC)" [ "$RC" -eq 1 ]
check "caught by the timed-call check" grep -q 'kept back' "$WORK/lazy.json"

# No reference to time beside the candidate: the harness's null calls stand in. A runner whose
# clock the candidate rewrote reports a tenth of each call; the parent's clock sees the rest. The
# same slow work with the clock untouched passes.
sed 's/dl_iterate_phdr(visit, NULL);//' "$KB/exploits/patch_clock.c" >"$WORK/slow_honest.c"
verify "$WORK/slow.json" "$T" "$WORK/slow_honest.c" --no-policy
check "imported task, same work, clock untouched: ok (status $(field "$WORK/slow.json" status): $(field "$WORK/slow.json" reason))" \
	[ "$(field "$WORK/slow.json" status)" = ok ]
verify "$WORK/pclock.json" "$T" "$KB/exploits/patch_clock.c" --no-policy
verify "$WORK/slow2.json" "$T" "$WORK/slow_honest.c" --no-policy  # the same work again: the faster honest time is the bar
check "imported task, runner clock rewritten: hacking or paid for, against the harness (status $(field "$WORK/pclock.json" status): $(field "$WORK/pclock.json" reason))" \
	paid_for "$WORK/pclock.json" "$WORK/slow.json" "$WORK/slow2.json"
# (the harness's own work a call: since the host harness evicts only the call's data it is some
# microseconds for this task, and may be measured as 0 within the noise)
check "the harness's overhead is in the verdict, measured over its batches" \
	python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["timing"]; p=t["parent_clock"]; sys.exit(0 if p["harness_ms"] >= 0 and p["batches"] > 0 and "harness" not in t else 1)' "$WORK/slow.json"
check "the harness's runner is listed" \
	python3 -c 'import json,sys; sys.exit(0 if "harness" in json.load(open(sys.argv[1]))["runners"] else 1)' "$WORK/slow.json"

# Baselines the import measured become speedups, with where they were measured.
python3 - "$T/task.json" <<'EOF'
import json, sys
p = sys.argv[1]
t = json.load(open(p))
t["baselines"] = {"eager_ms": 2.0, "compile_ms": 1.0, "device": "NVIDIA H200"}
json.dump(t, open(p, "w"))
EOF
verify "$WORK/base.json" "$T" "$KB/solutions/linear_relu.c"
check "verify with baselines ($RC)" [ "$RC" -eq 0 ]
check "speedups against eager and compile are the baselines over the median" python3 - "$WORK/base.json" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
med = v["timing"]["candidate"]["median_ms"]
sp, b = v["speedup"], v["baselines"]
ok = abs(sp["vs_eager"] - 2.0 / med) < 1e-6 * sp["vs_eager"] and \
    abs(sp["vs_compile"] - 1.0 / med) < 1e-6 * sp["vs_compile"] and \
    b["measured_on"] == "NVIDIA H200" and "baselines_from_other_device" in v["flags"]
sys.exit(0 if ok else 1)
EOF
"$STITCH" verify --backend host --seed 7 --min-time 5 --max-rse 0.5 --max-samples 200 \
	"$T" "$KB/solutions/linear_relu.c" >"$WORK/base.txt" 2>/dev/null
check "the text verdict shows the PyTorch speedups" grep -q 'vs PyTorch eager.*vs torch.compile' "$WORK/base.txt"

# A task that stores its seeds is judged on them, or with --fresh-seeds on seeds its program
# draws now.
TS=$ROOT/kb/level1/linear_relu_s
"$STITCH" import kernelbench "$KB/linear_relu.py" --out "$TS" --name linear_relu_s --store-seeds \
	>/dev/null 2>"$WORK/lrs.err"
check "--store-seeds: the seeds are on disk ($(tail -n 1 "$WORK/lrs.err"))" [ -s "$TS/data/seed1.safetensors" ]
verify "$WORK/stored.json" "$TS" "$KB/solutions/linear_relu.c"
check "stored seeds: correct, no live reference ($RC)" python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if v["status"] == "ok" and "reference_runner" not in v else 1)' "$WORK/stored.json"
verify "$WORK/fresh.json" "$TS" "$KB/solutions/linear_relu.c" --fresh-seeds
check "--fresh-seeds: correct ($RC)" [ "$RC" -eq 0 ]
check "--fresh-seeds: judged on seeds the program drew" python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); sys.exit(0 if len(v["correctness"]) == 3 and len(v["reference_runner"]["draw_s"]) == 4 else 1)' "$WORK/fresh.json"
F=$ROOT/kb/level1/linear_relu_f
mkdir -p "$F" && cp -r "$T"/. "$F"/
sed -i 's/"name": "linear_relu"/"name": "linear_relu_f"/' "$F/task.json"
sed -i 's/nn.Linear(in_features, out_features)/nn.Linear(in_features, out_features, bias=True); torch.manual_seed(5); self.fc.reset_parameters()/' "$F/model.py"
verify "$WORK/changed.json" "$F" "$KB/solutions/linear_relu.c"
check "a changed program is refused ($RC)" [ "$RC" -eq 2 ]
check "a changed program: says the params differ" grep -q "no longer builds the params" "$WORK/changed.json.err"
verify "$WORK/notkb.json" "$TASK" "$FIX/good.c" --fresh-seeds
check "--fresh-seeds on a suite task is bad input ($RC)" [ "$RC" -eq 2 ]
check "--fresh-seeds on a suite task says why" grep -q "not an imported KernelBench task" "$WORK/notkb.json.err"

# A damaged data file is bad input that names the file and the tensor.
B=$ROOT/kb/level1/linear_relu_b
mkdir -p "$B" && cp -r "$TS"/. "$B"/
sed -i 's/"name": "linear_relu_s"/"name": "linear_relu_b"/' "$B/task.json"
cp "$B/data/params.safetensors" "$B/data/seed2.safetensors"
verify "$WORK/damaged.json" "$B" "$KB/solutions/linear_relu.c"
check "a damaged seed file is bad input ($RC)" [ "$RC" -eq 2 ]
check "the message names the file and the tensor" grep -q "seed2.safetensors: no tensor 'x0'" "$WORK/damaged.json.err"

# 3. The tolerance audit at import (scripts/kb_tol.py): a copied tolerance that admits all zeros
# is tightened, a degenerate program is flagged, and the report over a folder counts both.
A=$KB/audit/level1
W=$ROOT/kb/level1/wide_softmax
"$STITCH" import kernelbench "$A/wide_softmax.py" --out "$W" >/dev/null 2>"$WORK/wide.err"
check "wide_softmax imports ($(tail -n 1 "$WORK/wide.err"))" [ -f "$W/task.json" ]
check "the import says it tightened y0's tolerance and why" grep -q "y0: tolerance .*zeros.* passed the copied tolerance" "$WORK/wide.err"
check "task.json records the change: atol scaled to the output, under 1e-4" python3 - "$W/task.json" <<'EOF2'
import json, sys
t = json.load(open(sys.argv[1]))
a, tol = t["source"]["tol_audit"], t["outputs"][0]["tol"]
ok = "zeros" in a["admitted"]["y0"] and a["changed"]["y0"]["from"]["atol"] == 1e-4 and \
    0 < tol.get("atol", 1) < 1e-6 and not a["degenerate"]
sys.exit(0 if ok else 1)
EOF2
verify "$WORK/wide.json" "$W" "$KB/solutions/wide_softmax.c"
check "wide_softmax: an honest answer passes the audited tolerance ($RC: $(field "$WORK/wide.json" reason))" [ "$RC" -eq 0 ]
verify "$WORK/zeros.json" "$W" "$KB/exploits/zeros.c"
check "wide_softmax: all zeros is incorrect now ($RC)" [ "$(field "$WORK/zeros.json" status)" = incorrect ]
D=$ROOT/kb/level1/flat_out
"$STITCH" import kernelbench "$A/flat_out.py" --out "$D" >/dev/null 2>"$WORK/flat.err"
check "flat_out imports, called degenerate ($(tail -n 1 "$WORK/flat.err"))" grep -q "y0: degenerate" "$WORK/flat.err"
check "a program whose output is right for every input gets no verdict without the flag" python3 - "$D/task.json" <<'EOF2'
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["source"]["tol_audit"]["degenerate"].get("y0") else 1)
EOF2
python3 - "$WORK/flat.c" <<'EOF2'
import sys
open(sys.argv[1], "w").write("""#include "stitch/solution.h"
int st_init(const st_config *c, const st_tensor *p, int32_t n, cudaStream_t s, void **o)
{ (void)c; (void)p; (void)n; (void)s; *o = 0; return 0; }
int st_run(void *p, const st_tensor *in, int32_t ni, st_tensor *out, int32_t no, cudaStream_t s)
{ (void)p; (void)in; (void)ni; (void)no; (void)s; float *y = out[0].data;
  for (int64_t i = 0; i < out[0].shape[0] * out[0].shape[1]; i++) y[i] = -1.0f; return 0; }
void st_free(void *p) { (void)p; }
""")
EOF2
verify "$WORK/flat.json" "$D" "$WORK/flat.c"
check "a constant answer to a degenerate task is ok but flagged degenerate_task" python3 - "$WORK/flat.json" <<'EOF2'
import json, sys
v = json.load(open(sys.argv[1]))
sys.exit(0 if v["status"] == "ok" and "degenerate_task" in v["flags"] else 1)
EOF2
mkdir -p "$WORK/kbaudit/level1" && cp "$A"/*.py "$KB/linear_relu.py" "$WORK/kbaudit/level1/"
"$STITCH_PYTHON" "$STITCH_SRC/scripts/kb_audit.py" "$WORK/kbaudit" --levels 1 --json "$WORK/kb_audit.json" >"$WORK/kb_audit.out" 2>&1
rc=$?
check "kb_audit: exit 0, no import admits a trivial answer unflagged ($rc: $(tail -n 1 "$WORK/kb_audit.out"))" [ "$rc" -eq 0 ]
check "kb_audit counts: 3 ran, KernelBench's tolerance admits 2, 1 tightened, 1 degenerate" python3 - "$WORK/kb_audit.json" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
ok = (c["ran"], c["kb_tolerance_admits_trivial"], c["copied_tolerance_admits_trivial"],
      c["tightened_at_import"], c["degenerate"], c["import_admits_trivial_unflagged"],
      c["widened_at_import"]) == (3, 2, 2, 1, 1, 0, 0)
sys.exit(0 if ok else print(c) or 1)
EOF2

# 4. Programs that cannot be imported: exit 2 and a message naming the cause.
bad_import() { # bad_import FILE EXPECTED_TEXT
	"$STITCH" import kernelbench "$KB/bad/$1" --out "$ROOT/bad/${1%.py}" >/dev/null 2>"$WORK/bad.err"
	local rc=$?
	check "$1: exit 2 ($rc)" [ "$rc" -eq 2 ]
	check "$1: says '$2' ($(tail -n 1 "$WORK/bad.err"))" grep -q "$2" "$WORK/bad.err"
}
bad_import no_model.py "no Model"
bad_import fails.py "failed to run"
bad_import complex_input.py "complex64 is not supported"
bad_import dropout.py "Dropout 'drop'"
bad_import string_input.py "tensors and Python numbers only"
bad_import huge_input.py "does not fit in memory (4398046511104 bytes asked for at once): the host has"
"$STITCH" import kernelbench "$KB/linear_relu.py" --out "$T" >/dev/null 2>"$WORK/exists.err"
check "an existing task is not overwritten without --force ($?)" grep -q -- "--force" "$WORK/exists.err"
"$STITCH" import kernelbench "$WORK/none.py" >/dev/null 2>"$WORK/none.err"
check "a missing file is bad input ($?)" grep -q "no such file" "$WORK/none.err"
"$STITCH" import kernelbench "$KB/linear_relu.py" --out "$WORK/x/other_name" >/dev/null 2>"$WORK/name.err"
check "--out must end in the task name" grep -q "must end in the task name" "$WORK/name.err"
STITCH_PYTHON=/nonexistent/python "$STITCH" import kernelbench "$KB/linear_relu.py" \
	--out "$WORK/y/linear_relu" >/dev/null 2>"$WORK/nopy.err"
rc=$?
check "no python is an environment error ($rc)" [ "$rc" -eq 3 ]
check "no python names STITCH_PYTHON" grep -q STITCH_PYTHON "$WORK/nopy.err"
"$STITCH" import kernelbench --help | grep -q "get_init_inputs"
check "import --help explains the program format" [ $? -eq 0 ]

# 5. A Python number among forward()'s inputs: a one-element tensor for the solution, the number
# for the model, constant across timed calls.
S=$WORK/kbs/level1/scalar_scale
"$STITCH" import kernelbench "$KB/inputs/scalar_scale.py" --out "$S" >/dev/null 2>"$WORK/sc.err"
check "a program taking a Python number imports ($(tail -n 1 "$WORK/sc.err"))" [ -f "$S/task.json" ]
check "the number is a one-element f32 input, constant in timed calls" python3 - "$S/task.json" <<'EOF'
import json, sys
x1 = json.load(open(sys.argv[1]))["inputs"][1]
sys.exit(0 if x1["shape"] == [1] and x1["dtype"] == "f32" and
         x1["init"] == {"dist": "const", "value": 2.5} else 1)
EOF
check "the description says what the one-element input is" grep -q "the Python number forward() takes, 2.5" "$S/task.json"
verify "$WORK/sc.json" "$S" "$KB/solutions/scalar_scale.c"
check "scalar_scale: correct ($RC)" [ "$RC" -eq 0 ]
sed 's/\* scale;/* 2.0f;/' "$KB/solutions/scalar_scale.c" >"$WORK/noscale.c"
verify "$WORK/noscale.json" "$S" "$WORK/noscale.c"
check "a solution that ignores the number is incorrect ($RC)" [ "$RC" -eq 1 ]

verdicts_check
echo "kernelbench: $PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
