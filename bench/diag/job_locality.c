/*
 * Diagnostic (bench/sched_cost.sh, CELLSCHED_BENCH_TRIM=1): loaded into a
 * running slurmctld by gdb (dlopen), while gdb holds it stopped, it measures
 * how scattered the pending jobs' records are in memory. The main scheduler
 * walks every pending job each cycle and touches, per job, the job record
 * and the separately allocated details, step list and select jobinfo; the
 * farther apart these are, the more cache lines and pages each cycle pulls
 * in. Writes one line to the file named by its argument:
 *   "pending P pages N near_details D near_steps S near_next X"
 * N: distinct 4 KiB pages holding those four pieces of all pending jobs;
 * D / S: pending jobs whose details / step list lie within 4 KiB of the job
 * record; X: jobs whose record lies within 64 KiB of the previous pending
 * job's record in job_list order.
 *
 * Build (against the configured Slurm tree slurmctld was built from):
 *   gcc -shared -fPIC -O2 -I$BUILD -o job_locality.so bench/diag/job_locality.c
 * Never part of the plugins.
 */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "src/common/list.h"
#include "src/slurmctld/slurmctld.h"

struct acc {
	long pending, near_details, near_steps, near_next;
	uintptr_t prev;
	uintptr_t *pages;
	long n_pages, cap;
};

static void _page(struct acc *a, const void *p)
{
	if (!p)
		return;
	if (a->n_pages == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 65536;
		a->pages = realloc(a->pages, a->cap * sizeof(uintptr_t));
	}
	a->pages[a->n_pages++] = (uintptr_t) p >> 12;
}

static long _dist(const void *a, const void *b)
{
	return labs((long) ((intptr_t) a - (intptr_t) b));
}

static int _job(void *x, void *arg)
{
	job_record_t *j = x;
	struct acc *a = arg;

	if (!IS_JOB_PENDING(j))
		return 0;
	a->pending++;
	_page(a, j);
	_page(a, j->details);
	_page(a, j->step_list);
	_page(a, j->select_jobinfo);
	if (j->details && _dist(j, j->details) < 4096)
		a->near_details++;
	if (j->step_list && _dist(j, j->step_list) < 4096)
		a->near_steps++;
	if (a->prev && _dist((void *) a->prev, j) < 65536)
		a->near_next++;
	a->prev = (uintptr_t) j;
	return 0;
}

static int _cmp(const void *x, const void *y)
{
	uintptr_t a = *(const uintptr_t *) x, b = *(const uintptr_t *) y;
	return (a > b) - (a < b);
}

long cellsched_diag_job_locality(const char *out)
{
	struct acc a = { 0 };
	long distinct = 0;
	FILE *f;

	if (job_list)
		list_for_each(job_list, _job, &a);
	if (a.n_pages) {
		qsort(a.pages, a.n_pages, sizeof(uintptr_t), _cmp);
		distinct = 1;
		for (long i = 1; i < a.n_pages; i++)
			distinct += a.pages[i] != a.pages[i - 1];
	}
	free(a.pages);
	if ((f = fopen(out, "w"))) {
		fprintf(f, "pending %ld pages %ld near_details %ld near_steps %ld near_next %ld\n",
			a.pending, distinct, a.near_details, a.near_steps, a.near_next);
		fclose(f);
	}
	return a.pending;
}
