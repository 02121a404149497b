/* The list of neighbouring runners of neighbours.h, under one mutex: signals are sent with it
 * held, so that a runner that leaves (before its owner kills and reaps it) is never signalled
 * after it left. */
#include "verify/neighbours.h"

#include <signal.h>

int st_neighbours_init(st_neighbours *nb)
{
	nb->n = 0;
	return pthread_mutex_init(&nb->mu, NULL);
}

void st_neighbours_free(st_neighbours *nb)
{
	pthread_mutex_destroy(&nb->mu);
	nb->n = 0;
}

int st_neighbours_join(st_neighbours *nb, pid_t group)
{
	int rc = -1;
	pthread_mutex_lock(&nb->mu);
	if (group > 0 && nb->n < ST_NEIGHBOURS_MAX) {
		nb->group[nb->n++] = group;
		rc = 0;
	}
	pthread_mutex_unlock(&nb->mu);
	return rc;
}

void st_neighbours_leave(st_neighbours *nb, pid_t group)
{
	pthread_mutex_lock(&nb->mu);
	for (int i = 0; i < nb->n; i++)
		if (nb->group[i] == group) {
			nb->group[i] = nb->group[--nb->n];
			break;
		}
	pthread_mutex_unlock(&nb->mu);
}

/* Send sig to every group but own; how many were sent it. */
static int signal_others(st_neighbours *nb, pid_t own, int sig)
{
	int sent = 0;
	pthread_mutex_lock(&nb->mu);
	for (int i = 0; i < nb->n; i++)
		if (nb->group[i] != own && kill(-nb->group[i], sig) == 0)
			sent++;
	pthread_mutex_unlock(&nb->mu);
	return sent;
}

int st_neighbours_stop(st_neighbours *nb, pid_t own)
{
	return signal_others(nb, own, SIGSTOP);
}

void st_neighbours_resume(st_neighbours *nb, pid_t own)
{
	signal_others(nb, own, SIGCONT);
}
