/* The timed calls a runner committed to: for each, the seed its inputs came from (derived by the
 * parent from the batch seed it sent, common/digest.h st_call_seed), the buffer set it ran on and
 * the digest of its outputs the runner sent back. After timing the parent picks some of them at
 * random and audits them (docs/architecture.md, "commit, then audit"). */
#ifndef ST_COMMITS_H
#define ST_COMMITS_H

#include <stdint.h>

typedef struct st_commit {
	uint64_t seed;   /* the call's inputs: st_call_seed(batch seed, index in batch), or for kept
	                  * inputs its buffer set's fill seed */
	uint64_t digest; /* what the runner committed its outputs to */
	int set;         /* the buffer set it ran on (index in batch % 2) */
} st_commit;

typedef struct st_commits {
	st_commit *v;
	int n, cap;
} st_commits;

/* Append a batch of n calls sent with batch_seed, whose digests (checked already, see
 * st_reply_check_time) are digests[0..n). 0, or -1 when memory runs out (nothing appended). */
int st_commits_add_batch(st_commits *c, uint64_t batch_seed, int n, const uint64_t *digests);
/* The same for a task whose inputs its host generator makes: they are kept through timing, so
 * call i's are buffer set i % 2's, filled from set_seed[i % 2] (st_fill_seed). */
int st_commits_add_kept(st_commits *c, const uint64_t set_seed[2], int n,
                        const uint64_t *digests);
void st_commits_free(st_commits *c);

/* Choose min(k, c->n) distinct calls uniformly at random (from the kernel's random source, so
 * that nothing the runner saw predicts them) into idx[]; returns how many. */
int st_commits_pick(const st_commits *c, int k, int *idx);

/* Calls whose digest another call also committed to: outputs the same for other fresh inputs,
 * which a call that skipped its work leaves (its poisoned buffers, the same every time) and an
 * honest one only where its outputs hardly depend on the inputs. Up to k of them, none among
 * skip[0..n_skip), chosen at random, into idx[]; returns how many, or -1 when memory runs out. */
int st_commits_repeated(const st_commits *c, int k, const int *skip, int n_skip, int *idx);

#endif
