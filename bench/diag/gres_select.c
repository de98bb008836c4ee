/*
 * Diagnostic (bench/sched_cost.sh, CELLSCHED_BENCH_TRIM=1): loaded into a
 * running slurmctld by gdb (dlopen), while gdb holds it stopped, it counts
 * what pending jobs keep of cons_tres's GRES selection: a scheduling test
 * that fits a job (backfill's will-run tests do, for a start in the future)
 * allocates gres_js->gres_cnt_node_select (8 bytes per node of the
 * cluster) and, with GRES topology, gres_bit_select, and nothing frees
 * them before the job ends. Writes one line to the file named by its
 * argument: "pending P with_select S select_bytes B", then the same for
 * the pending jobs cellsched placed (AdminComment "cellsched: ...").
 *
 * Build (against the configured Slurm tree slurmctld was built from):
 *   gcc -shared -fPIC -O2 -I$BUILD -o gres_select.so bench/diag/gres_select.c
 * Never part of the plugins.
 */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "src/common/list.h"
#include "src/common/gres.h"
#include "src/slurmctld/slurmctld.h"

struct acc {
	long pending, with_select, bytes;
	long dl_pending, dl_with_select, dl_bytes;	/* AdminComment "cellsched: ..." */
	long job_bytes;
	int has;
};

static int _gres(void *x, void *arg)
{
	gres_state_t *gs = x;
	struct acc *a = arg;
	gres_job_state_t *js = gs ? gs->gres_data : NULL;

	if (!js)
		return 0;
	if (js->gres_cnt_node_select) {
		a->job_bytes += (long) js->total_node_cnt * sizeof(uint64_t);
		a->has = 1;
	}
	if (js->gres_bit_select) {
		a->job_bytes += (long) js->total_node_cnt * sizeof(bitstr_t *);
		a->has = 1;
	}
	return 0;
}

static int _job(void *x, void *arg)
{
	job_record_t *j = x;
	struct acc *a = arg;

	if (!IS_JOB_PENDING(j))
		return 0;
	a->pending++;
	a->has = 0;
	a->job_bytes = 0;
	if (j->gres_list_req)
		list_for_each(j->gres_list_req, _gres, a);
	a->with_select += a->has;
	a->bytes += a->job_bytes;
	if (j->admin_comment && !strncmp(j->admin_comment, "cellsched:", 10)) {
		a->dl_pending++;
		a->dl_with_select += a->has;
		a->dl_bytes += a->job_bytes;
	}
	return 0;
}

long cellsched_diag_gres_select(const char *out)
{
	struct acc a = { 0 };
	FILE *f;

	if (job_list)
		list_for_each(job_list, _job, &a);
	if ((f = fopen(out, "w"))) {
		fprintf(f, "pending %ld with_select %ld select_bytes %ld\n",
			a.pending, a.with_select, a.bytes);
		fprintf(f, "dl_pending %ld dl_with_select %ld dl_select_bytes %ld\n",
			a.dl_pending, a.dl_with_select, a.dl_bytes);
		fclose(f);
	}
	return a.bytes;
}
