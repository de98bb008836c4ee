/*
 * cellsched_shim.h - stable C accessors over Slurm's internal structs.
 *
 * Compiled against the configured source tree of the target release, so the
 * same function names work on 22.05.8 and 24.11.5. Every Slurm function is
 * resolved with dlsym(RTLD_DEFAULT, ...) on first use: the shim loads in any
 * process, and a function whose symbol is absent (slurmctld-only API called
 * from slurmd/slurmstepd/srun) returns its "unavailable" value instead.
 *
 * Locking: functions taking a cellsched_job_t or node index read/write
 * slurmctld's tables; the caller must hold the matching slurmctld lock
 * (site_factor_p_update already holds the job write lock; job_submit() holds
 * the job read lock; a plugin thread must use cellsched_with_lock()).
 */
#ifndef CELLSCHED_SHIM_H
#define CELLSCHED_SHIM_H

#include <stdint.h>

typedef struct job_record cellsched_job_t;

/* Lock sets for cellsched_with_lock(). */
enum cellsched_lock_kind {
	CELLSCHED_LOCK_READ = 0,  /* conf R, job R, node R, part R, fed -  */
	CELLSCHED_LOCK_WRITE = 1, /* conf R, job W, node W, part R, fed R (as the update_job RPC) */
};

/* Release the shim was compiled for (SLURM_VERSION_NUMBER). */
uint32_t cellsched_shim_version_number(void);
/* 1 when slurmctld's API (lock_slurmctld, job_list, update_job) is reachable in this process. */
int cellsched_in_slurmctld(void);

/* Strings Slurm owns: xstrdup (NULL when libslurm is absent) and xfree. */
char *cellsched_xstrdup(const char *s);
void cellsched_xfree(void *p);

/* Runs cb(arg) holding the given slurmctld locks; returns cb's value, or -1 outside slurmctld. */
int cellsched_with_lock(int kind, int (*cb)(void *arg), void *arg);
/* Asks slurmctld to run the main scheduler soon. Returns 0, or -1 outside slurmctld. */
int cellsched_queue_scheduler(void);

/* Calls cb(job, arg) for each job (only pending ones when pending_only);
 * a non-zero cb result stops the walk. Returns the number of jobs visited, -1 outside slurmctld. */
int cellsched_for_each_job(int pending_only, int (*cb)(cellsched_job_t *job, void *arg), void *arg);
/* A walk over the job list in pieces, the job lock held for each piece
 * and released between them. Slurm's list moves a registered iterator past
 * a node another thread removes, so the walk stays valid while unlocked.
 * Start and continue it only with the job lock held.
 *
 * cellsched_job_walk_start: a new walk at the head of the list; NULL outside
 * slurmctld, without a job list, or when no iterator can be made.
 * cellsched_job_walk_next: calls cb(job, arg) for the next jobs (only pending
 * ones when pending_only) until cb returns non-zero (a pause after that job)
 * or the list ends. Returns 1 after a pause, 0 at the end of the list, -1 if
 * the walk cannot go on (slurmctld is shutting down, or the job list is not
 * the one the walk started on); after 0 or -1 the walk is freed (on -1 the
 * iterator is left to the list, which frees it with itself).
 * cellsched_job_walk_stop: frees a walk that is not finished (job lock held). */
typedef struct cellsched_job_walk cellsched_job_walk_t;
cellsched_job_walk_t *cellsched_job_walk_start(void);
int cellsched_job_walk_next(cellsched_job_walk_t *walk, int pending_only,
			    int (*cb)(cellsched_job_t *job, void *arg), void *arg);
void cellsched_job_walk_stop(cellsched_job_walk_t *walk);
/* Job by id, or NULL. */
cellsched_job_t *cellsched_find_job(uint32_t job_id);

/* Job fields (strings are borrowed from Slurm and may be NULL; times are Unix seconds, 0 unset). */
uint32_t cellsched_job_id(const cellsched_job_t *job);
uint32_t cellsched_job_user_id(const cellsched_job_t *job);
uint32_t cellsched_job_state(const cellsched_job_t *job);       /* full job_state (base | flags) */
int cellsched_job_is_pending(const cellsched_job_t *job);
uint32_t cellsched_job_state_reason(const cellsched_job_t *job); /* enum job_state_reason */
const char *cellsched_job_name(const cellsched_job_t *job);
const char *cellsched_job_partition(const cellsched_job_t *job);
const char *cellsched_job_admin_comment(const cellsched_job_t *job);
const char *cellsched_job_comment(const cellsched_job_t *job);
const char *cellsched_job_features(const cellsched_job_t *job);      /* details->features */
const char *cellsched_job_tres_per_node(const cellsched_job_t *job); /* e.g. "gres:gpu:a100:4" (22.05) / "gres/gpu:a100:4" (24.11) */
const char *cellsched_job_tres_req_str(const cellsched_job_t *job);
const char *cellsched_job_tres_alloc_str(const cellsched_job_t *job);
const char *cellsched_job_nodes(const cellsched_job_t *job);         /* allocated node list */
uint32_t cellsched_job_min_nodes(const cellsched_job_t *job);        /* NO_VAL without details */
uint32_t cellsched_job_max_nodes(const cellsched_job_t *job);        /* 0 or NO_VAL: not set */
uint32_t cellsched_job_num_tasks(const cellsched_job_t *job);
uint32_t cellsched_job_time_limit(const cellsched_job_t *job);       /* minutes, NO_VAL/INFINITE */
uint32_t cellsched_job_priority(const cellsched_job_t *job);
uint32_t cellsched_job_site_factor(const cellsched_job_t *job);
int64_t cellsched_job_submit_time(const cellsched_job_t *job);
int64_t cellsched_job_begin_time(const cellsched_job_t *job);
int64_t cellsched_job_start_time(const cellsched_job_t *job);
/* Sets job->site_factor (NICE_OFFSET = neutral). Needs the job write lock. */
void cellsched_job_set_site_factor(cellsched_job_t *job, uint32_t factor);
/* Pending jobs only: frees the per-node GRES selection arrays (cons_tres's
 * gres_cnt_node_select, gres_bit_select and, from 23.11, gres_per_bit_select)
 * a scheduling test that fitted the job left in its GRES request; Slurm
 * keeps them until the job ends and rebuilds them at the next such test.
 * Returns the bytes of the arrays freed (the per-node tables; 0 outside
 * slurmctld or when none). Needs the job write lock. */
uint64_t cellsched_job_release_gres_select(cellsched_job_t *job);
/* Replaces admin_comment with an xstrdup'd copy (NULL clears). Needs the job write lock. */
int cellsched_job_set_admin_comment(cellsched_job_t *job, const char *text);

/* spank_job_env of a job record ("NAME=value" entries). */
uint32_t cellsched_job_env_count(const cellsched_job_t *job);
const char *cellsched_job_env_at(const cellsched_job_t *job, uint32_t i);
/* Sets/overwrites NAME=value in job->spank_job_env. Needs the job write lock. 0 or -1. */
int cellsched_job_env_set(cellsched_job_t *job, const char *name, const char *value);

/* details->env_sup: supplemental "NAME=value" entries slurmctld adds to the
 * batch step's environment at launch (overriding the submitted ones, see
 * get_job_env()) and sends in the allocation response that srun/salloc put
 * into their environment. Kept in the state save. 0 entries without details. */
uint32_t cellsched_job_env_sup_count(const cellsched_job_t *job);
const char *cellsched_job_env_sup_at(const cellsched_job_t *job, uint32_t i);
/* Sets/overwrites NAME=value in details->env_sup. Needs the job write lock.
 * 0, or -1 (no details, bad name, allocation failure, outside Slurm). */
int cellsched_job_env_sup_set(cellsched_job_t *job, const char *name, const char *value);
/* 1 for a batch job (job script), else 0. */
int cellsched_job_is_batch(const cellsched_job_t *job);
uint32_t cellsched_job_exit_code(const cellsched_job_t *job);   /* wait(2) status of the batch script */
uint32_t cellsched_job_restart_cnt(const cellsched_job_t *job); /* requeues so far */
int cellsched_job_requeue_allowed(const cellsched_job_t *job);  /* details->requeue != 0 */
int64_t cellsched_job_end_time(const cellsched_job_t *job);
/* 1 when a node of the job's node_bitmap has not registered with this
 * slurmctld yet (a restarted slurmctld knows a node's GRES in use only from
 * then on) and is neither DOWN nor NOT_RESPONDING; 0 otherwise (also for a
 * job without nodes). Needs the node read lock. */
int cellsched_job_awaits_registration(const cellsched_job_t *job);

/* Caller holds the CELLSCHED_LOCK_WRITE locks. Slurm error code, -1 outside slurmctld. */
int cellsched_job_signal(uint32_t job_id, uint16_t signal); /* batch script and all steps (scancel --full) */
int cellsched_job_requeue(uint32_t job_id);                 /* as `scontrol requeue` by root */

/* Same for a job descriptor at submit time (job_submit's job_desc_msg_t *). */
int cellsched_env_array_set(char ***env, uint32_t *size, const char *name, const char *value);

/* A pending-job update through slurmctld's own update_job(), as root. NULL
 * strings / NO_VAL numbers leave a field unchanged; "" clears a string. */
typedef struct {
	uint32_t job_id;
	const char *features;      /* node feature expression, e.g. "a100" */
	const char *gres;          /* per-node GRES as users write it, e.g. "gpu:4"; tres prefix added here */
	const char *admin_comment;
	uint32_t min_nodes;
	uint32_t max_nodes;
	uint32_t num_tasks;
	uint32_t time_limit;       /* minutes */
	int64_t begin_time;        /* Unix seconds; 0 = unchanged */
} cellsched_job_update_t;
/* Initialises u: job_id, all strings NULL, numbers NO_VAL. */
void cellsched_job_update_init(cellsched_job_update_t *u, uint32_t job_id);
/* Applies u; caller must hold the write lock (cellsched_with_lock(CELLSCHED_LOCK_WRITE, ...)).
 * Returns a Slurm error code (0 = success, -1 outside slurmctld). */
int cellsched_update_job(const cellsched_job_update_t *u);

/* Node table (caller holds at least the node read lock). Index in [0, count); absent slots return NULL/0. */
int cellsched_node_count(void);
const char *cellsched_node_name(int i);
const char *cellsched_node_features(int i); /* active features */
const char *cellsched_node_gres(int i);     /* configured GRES, e.g. "gpu:a100:4" */
uint32_t cellsched_node_state(int i);       /* node_state (base | flags) */
int cellsched_node_is_available(int i);     /* registered and not DOWN, DRAIN, FAIL, FUTURE or NO_RESPOND */
uint16_t cellsched_node_cpus(int i);
/* GRES in use, e.g. "gpu:a100:2(IDX:0-1)"; caller frees with cellsched_xfree. */
char *cellsched_node_gres_used(int i);
/* slurmctld's last_node_update (Unix seconds; set whenever a node's state
 * or allocation changes, e.g. a job starts or ends), or -1 outside slurmctld.
 * Read under the node read lock. */
int64_t cellsched_last_node_update(void);

#endif
