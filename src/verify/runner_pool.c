/* The runner pool (runner_pool.h): a list of idle runners under one mutex, and per kind of spare
 * asked for (a GPU, in a service) a few background threads that start spares of that kind, one
 * each at a time, until it has its count. Threads of their own per kind, so that one GPU's slow
 * starts do not hold up another's spares; several, so that a start that takes long (2.5 s
 * median in a busy two-GPU service, 0.3-0.5 s alone) does not hold up the next one: a service
 * takes spares about as fast as one thread can start them. */
#include "runner_pool.h"
#include "reply.h"
#include "common/clock.h"
#include "common/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_KINDS 16
#define KEY_MAX 8600
#define STARTERS 4 /* threads starting spares, per kind */
/* How long a take waits for a spare its kind's starters are starting, before the caller starts
 * one itself: a start takes 2-4 s in a busy two-GPU service. */
#define SPARE_WAIT_S 15.0

typedef struct idle {
	st_runner r;
	int kind;          /* index into kinds */
	char *key;         /* what it has loaded; NULL for a spare */
	double since;      /* when it went idle, for least-recently-used eviction */
} idle;

typedef struct kind {
	char backend[16];
	int flags;
	char devices[64];
	int starting;      /* spares of this kind its threads are starting now */
	int failing;       /* its last start failed: no take waits for the next */
	struct st_runner_pool *pool;
	int index;
	pthread_t threads[STARTERS];
	int n_threads;
} kind;

struct st_runner_pool {
	pthread_mutex_t mu;
	pthread_cond_t wake;  /* starters: a spare was taken, or the pool stops */
	pthread_cond_t ready; /* takers: a start ended */
	int stopping;
	int spares, max_loaded;
	kind kinds[POOL_KINDS];
	int n_kinds;
	idle *idle;
	int n_idle, cap_idle;
	st_runner_pool_stats stats;
};

static int find_kind(st_runner_pool *p, const char *backend, int flags, const char *devices)
{
	const char *d = devices ? devices : "";
	for (int i = 0; i < p->n_kinds; i++)
		if (!strcmp(p->kinds[i].backend, backend) && p->kinds[i].flags == flags &&
		    !strcmp(p->kinds[i].devices, d))
			return i;
	return -1;
}

static int add_kind(st_runner_pool *p, const char *backend, int flags, const char *devices)
{
	int k = find_kind(p, backend, flags, devices);
	if (k >= 0 || p->n_kinds == POOL_KINDS)
		return k;
	kind *x = &p->kinds[p->n_kinds];
	memset(x, 0, sizeof *x);
	x->pool = p;
	x->index = p->n_kinds;
	snprintf(x->backend, sizeof x->backend, "%s", backend);
	x->flags = flags;
	snprintf(x->devices, sizeof x->devices, "%s", devices ? devices : "");
	return p->n_kinds++;
}

static int spares_of(const st_runner_pool *p, int k)
{
	int n = 0;
	for (int i = 0; i < p->n_idle; i++)
		n += p->idle[i].kind == k && !p->idle[i].key;
	return n;
}

/* Remove idle[i] into *out (the caller holds the mutex). */
static void take_at(st_runner_pool *p, int i, idle *out)
{
	*out = p->idle[i];
	p->idle[i] = p->idle[--p->n_idle];
}

static int push(st_runner_pool *p, const idle *e)
{
	if (ST_GROW(p->idle, p->cap_idle, p->n_idle + 1, 16))
		return -1;
	p->idle[p->n_idle++] = *e;
	return 0;
}

/* A kept runner still answers (a teardown with nothing set up is a no-op for it). */
static int healthy(st_runner *r)
{
	if (!r->alive)
		return 0;
	json_t *req = json_pack("{s:s}", "op", "teardown"), *rep = NULL;
	st_err e;
	int ok = st_runner_call(r, req, -1, &rep, 5, &e) == ST_OK &&
	         st_reply_ok(rep);
	json_decref(req);
	json_decref(rep);
	return ok;
}

/* Start one spare and wait for its hello. Not under the GPU's lock: a start (driver, context)
 * took 0.5-1.9 s in a busy two-GPU service, and held shared it kept every timing on the GPU
 * waiting that long; the other GPU's starts, which no per-GPU lock covers, disturb a timing as
 * much as this GPU's (a sample now and then, which the median stop rule absorbs); and a service
 * of one worker per GPU never had the lock. */
static void start_spare(st_runner_pool *p, int k)
{
	const kind *x = &p->kinds[k]; /* backend, flags and devices do not change */
	idle e;
	memset(&e, 0, sizeof e);
	e.kind = k;
	st_err err;
	int started = !st_runner_start(&e.r, x->backend, "spare", x->flags,
	                               x->devices[0] ? x->devices : NULL, &err) &&
	              !st_runner_hello(&e.r, 120, &err);
	int kept = 0;
	pthread_mutex_lock(&p->mu);
	p->kinds[k].starting--;
	p->kinds[k].failing = !started;
	e.since = st_now_s();
	if (started && !p->stopping && !push(p, &e)) {
		p->stats.started++;
		kept = 1;
	}
	pthread_cond_broadcast(&p->ready);
	pthread_mutex_unlock(&p->mu);
	if (!kept)
		st_runner_stop(&e.r);
	if (!started) { /* a device that refuses runners: do not spin on it */
		struct timespec ts = {1, 0};
		nanosleep(&ts, NULL);
	}
}

static void *spare_thread(void *arg)
{
	st_runner_pool *p = ((kind *)arg)->pool;
	int k = ((kind *)arg)->index;
	pthread_mutex_lock(&p->mu);
	while (!p->stopping) {
		int n = p->spares - spares_of(p, k) - p->kinds[k].starting;
		if (n <= 0) {
			pthread_cond_wait(&p->wake, &p->mu);
			continue;
		}
		p->kinds[k].starting++;
		pthread_mutex_unlock(&p->mu);
		start_spare(p, k);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

st_runner_pool *st_runner_pool_new(int spares, int max_loaded)
{
	st_runner_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->ready, NULL);
	p->spares = spares < 0 ? 0 : spares;
	p->max_loaded = max_loaded < 0 ? 0 : max_loaded;
	return p;
}

void st_runner_pool_free(st_runner_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_cond_broadcast(&p->ready);
	pthread_mutex_unlock(&p->mu);
	for (int k = 0; k < p->n_kinds; k++)
		for (int t = 0; t < p->kinds[k].n_threads; t++)
			pthread_join(p->kinds[k].threads[t], NULL);
	for (int i = 0; i < p->n_idle; i++)
		st_runner_quit(&p->idle[i].r); /* all first: their device teardowns overlap */
	for (int i = 0; i < p->n_idle; i++) {
		st_runner_stop(&p->idle[i].r);
		free(p->idle[i].key);
	}
	free(p->idle);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->ready);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* Remove the first idle runner with `key` loaded (key NULL: a spare of kind_index) into *e;
 * the caller holds the mutex. 1, or 0. */
static int find_idle(st_runner_pool *p, int kind_index, const char *key, idle *e)
{
	for (int i = 0; i < p->n_idle; i++) {
		idle *x = &p->idle[i];
		if (key ? (x->key && !strcmp(x->key, key)) : (!x->key && x->kind == kind_index)) {
			take_at(p, i, e);
			return 1;
		}
	}
	return 0;
}

/* Take the first idle runner with `key` loaded (key NULL: a spare of kind_index), check it
 * answers, label it: 1, or 0. A spare not there yet is waited for (up to SPARE_WAIT_S) while
 * the kind's starters work and their last start succeeded: a start already under way ends
 * sooner than one the caller would begin, and the caller's would only add one more context
 * creation to those the driver serialises host-wide. */
static int take(st_runner_pool *p, int kind_index, const char *key, const char *label,
                st_runner *r, long *hits, long *misses)
{
	for (;;) {
		idle e;
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->wake); /* a spare gone, or wanted: start another */
		int found = find_idle(p, kind_index, key, &e);
		if (!found && !key && kind_index >= 0) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += (time_t)SPARE_WAIT_S;
			const kind *x = &p->kinds[kind_index];
			while (!found && !p->stopping && x->n_threads > 0 && !x->failing &&
			       pthread_cond_timedwait(&p->ready, &p->mu, &until) == 0)
				found = find_idle(p, kind_index, NULL, &e);
		}
		if (!found)
			++*misses;
		pthread_mutex_unlock(&p->mu);
		if (!found)
			return 0;
		free(e.key);
		if (!healthy(&e.r)) {
			st_runner_stop(&e.r);
			continue;
		}
		pthread_mutex_lock(&p->mu);
		++*hits;
		pthread_mutex_unlock(&p->mu);
		snprintf(e.r.label, sizeof e.r.label, "%s", label);
		*r = e.r;
		return 1;
	}
}

int st_runner_pool_take_spare(st_runner_pool *p, const char *backend, int flags,
                              const char *devices, const char *label, st_runner *r)
{
	if (!p || !p->spares)
		return 0;
	pthread_mutex_lock(&p->mu);
	int k = add_kind(p, backend, flags, devices);
	pthread_mutex_unlock(&p->mu);
	int got = k >= 0 && take(p, k, NULL, label, r, &p->stats.spare_hits, &p->stats.spare_misses);
	/* The kind's starters, once, after the take: the first ask of a kind finds only what was
	 * given back, never a spare that a starter it just made happened to finish first. */
	pthread_mutex_lock(&p->mu);
	int want = p->spares < STARTERS ? p->spares : STARTERS;
	while (k >= 0 && p->kinds[k].n_threads < want && !p->stopping &&
	       !pthread_create(&p->kinds[k].threads[p->kinds[k].n_threads], NULL, spare_thread,
	                       &p->kinds[k]))
		p->kinds[k].n_threads++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	return got;
}

int st_runner_pool_take_loaded(st_runner_pool *p, const char *key, const char *label,
                               st_runner *r)
{
	if (!p || !p->max_loaded || !key)
		return 0;
	return take(p, -1, key, label, r, &p->stats.loaded_hits, &p->stats.loaded_misses);
}

void st_runner_pool_give(st_runner_pool *p, st_runner *r, const char *backend, int flags,
                         const char *devices, const char *key)
{
	idle e = {.r = *r, .since = st_now_s()};
	memset(r, 0, sizeof *r);
	r->sock = -1;
	r->pid = -1;
	idle evict = {.kind = -1};
	int keep = 0;
	pthread_mutex_lock(&p->mu);
	e.kind = add_kind(p, backend, flags, devices);
	/* Of one key, as many as the spares of a kind (a GPU's workers) can use at once. */
	int same = 0;
	for (int i = 0; key && i < p->n_idle; i++)
		same += p->idle[i].key && !strcmp(p->idle[i].key, key);
	if (!p->stopping && e.kind >= 0 &&
	    (key ? p->max_loaded > 0 && same < (p->spares > 1 ? p->spares : 1)
	         : spares_of(p, e.kind) < p->spares)) {
		e.key = key ? strndup(key, KEY_MAX) : NULL;
		keep = (!key || e.key) && !push(p, &e);
		if (!keep)
			free(e.key);
	}
	/* Too many loaded: the least recently used one goes. */
	int loaded = 0, oldest = -1;
	for (int i = 0; i < p->n_idle; i++)
		if (p->idle[i].key) {
			loaded++;
			if (oldest < 0 || p->idle[i].since < p->idle[oldest].since)
				oldest = i;
		}
	if (loaded > p->max_loaded && oldest >= 0)
		take_at(p, oldest, &evict);
	pthread_mutex_unlock(&p->mu);
	if (!keep)
		st_runner_stop(&e.r);
	if (evict.kind >= 0) {
		free(evict.key);
		st_runner_stop(&evict.r);
	}
}

void st_runner_pool_stats_get(st_runner_pool *p, st_runner_pool_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	*out = p->stats;
	for (int i = 0; i < p->n_idle; i++) {
		if (p->idle[i].key)
			out->loaded++;
		else
			out->spares++;
	}
	pthread_mutex_unlock(&p->mu);
}
