/*
 * cellsched_shim.c - see cellsched_shim.h.
 *
 * Version differences between Slurm releases live here (guarded by
 * SLURM_VERSION_NUMBER) and in slurm-sys/src/compat.rs, nowhere else.
 * No Slurm symbol is referenced directly: every call goes through a pointer
 * found with dlsym(RTLD_DEFAULT, ...), so this object adds no undefined
 * symbols to a plugin (it loads in slurmd, slurmstepd and client commands,
 * and links into plain test executables).
 */
#include "config.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/slurm_protocol_defs.h"
#include "src/common/node_conf.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/slurmctld.h"
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#include "src/interfaces/gres.h"
#else
#include "src/common/gres.h"
#endif

#include "cellsched_shim.h"

/* Looks a symbol up once; *cache keeps it (NULL stays NULL and retries). */
static void *_sym(void **cache, const char *name)
{
	void *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_DEFAULT, name);
		__atomic_store_n(cache, p, __ATOMIC_RELEASE);
	}
	return p;
}

/* First of two names (prefixed alias in libslurm, plain name in libslurmfull). */
static void *_sym2(void **cache, const char *a, const char *b)
{
	void *p = _sym(cache, a);
	return p ? p : _sym(cache, b);
}

#define SYM(var, name) static void *var##_c; void *var = _sym(&var##_c, name)
#define SYM2(var, a, b) static void *var##_c; void *var = _sym2(&var##_c, a, b)

typedef void (*lock_fn_t)(slurmctld_lock_t);
typedef char *(*strdup_fn_t)(const char *);
typedef void (*xfree_fn_t)(void **);
typedef void *(*xcalloc_fn_t)(size_t, size_t, bool, bool, const char *, int, const char *);
typedef void *(*itr_create_fn_t)(void *);
typedef void *(*itr_next_fn_t)(void *);
typedef void (*itr_destroy_fn_t)(void *);
typedef job_record_t *(*find_job_fn_t)(uint32_t);
typedef void (*void_fn_t)(void);
typedef int (*update_job_fn_t)(slurm_msg_t *, uid_t, bool);
typedef void (*desc_fn_t)(job_desc_msg_t *);
typedef void (*msg_init_fn_t)(slurm_msg_t *);
typedef int (*env_overwrite_fn_t)(char ***, const char *, const char *);
typedef char *(*gres_str_fn_t)(void *);
typedef int (*job_signal_id_fn_t)(uint32_t, uint16_t, uint16_t, uid_t, bool);
typedef int (*job_requeue_fn_t)(uid_t, uint32_t, slurm_msg_t *, bool, uint32_t);
typedef void *(*xrecalloc_fn_t)(void **, size_t, size_t, bool, bool, const char *, int, const char *);

uint32_t cellsched_shim_version_number(void)
{
	return SLURM_VERSION_NUMBER;
}

static void *_job_list_var(void)
{
	SYM(p, "job_list");
	return p;
}

int cellsched_in_slurmctld(void)
{
	SYM(lock, "lock_slurmctld");
	SYM(upd, "update_job");
	return lock && upd && _job_list_var();
}

char *cellsched_xstrdup(const char *s)
{
	SYM2(f, "slurm_xstrdup", "xstrdup");
	if (!f)
		return NULL;
	return ((strdup_fn_t) f)(s);
}

void cellsched_xfree(void *p)
{
	SYM(f, "slurm_xfree");
	if (p && f)
		((xfree_fn_t) f)(&p);
}

static void *_xzalloc(size_t size)
{
	SYM(f, "slurm_xcalloc");
	if (!f)
		return NULL;
	return ((xcalloc_fn_t) f)(1, size, true, true, __FILE__, __LINE__, __func__);
}

int cellsched_with_lock(int kind, int (*cb)(void *arg), void *arg)
{
	SYM(lock, "lock_slurmctld");
	SYM(unlock, "unlock_slurmctld");
	slurmctld_lock_t l = { READ_LOCK, READ_LOCK, READ_LOCK, READ_LOCK, NO_LOCK };
	int rc;

	if (!lock || !unlock || !cb)
		return -1;
	if (kind == CELLSCHED_LOCK_WRITE) {
		l.job = WRITE_LOCK;
		l.node = WRITE_LOCK;
		l.fed = READ_LOCK;
	}
	((lock_fn_t) lock)(l);
	rc = cb(arg);
	((lock_fn_t) unlock)(l);
	return rc;
}

int cellsched_queue_scheduler(void)
{
	SYM(f, "queue_job_scheduler");
	if (!f)
		return -1;
	((void_fn_t) f)();
	return 0;
}

int cellsched_for_each_job(int pending_only, int (*cb)(cellsched_job_t *job, void *arg), void *arg)
{
	SYM2(create, "slurm_list_iterator_create", "list_iterator_create");
	SYM2(next, "slurm_list_next", "list_next");
	SYM2(destroy, "slurm_list_iterator_destroy", "list_iterator_destroy");
	void **list_var = _job_list_var();
	void *itr;
	job_record_t *job;
	int n = 0;

	if (!list_var || !create || !next || !destroy || !cb)
		return -1;
	if (!*list_var)
		return 0;
	itr = ((itr_create_fn_t) create)(*list_var);
	while ((job = ((itr_next_fn_t) next)(itr))) {
		if (pending_only && !IS_JOB_PENDING(job))
			continue;
		n++;
		if (cb(job, arg))
			break;
	}
	((itr_destroy_fn_t) destroy)(itr);
	return n;
}

struct cellsched_job_walk {
	void *list;
	void *itr;
};

/* True when slurmctld has begun to shut down (its job list may soon be freed). */
static int _shutting_down(void)
{
	SYM(cfg, "slurmctld_config");
	return cfg && ((slurmctld_config_t *) cfg)->shutdown_time != 0;
}

cellsched_job_walk_t *cellsched_job_walk_start(void)
{
	SYM2(create, "slurm_list_iterator_create", "list_iterator_create");
	void **list_var = _job_list_var();
	cellsched_job_walk_t *w;

	if (!list_var || !*list_var || !create || _shutting_down())
		return NULL;
	if (!(w = calloc(1, sizeof(*w))))
		return NULL;
	w->list = *list_var;
	w->itr = ((itr_create_fn_t) create)(w->list);
	if (!w->itr) {
		free(w);
		return NULL;
	}
	return w;
}

void cellsched_job_walk_stop(cellsched_job_walk_t *w)
{
	SYM2(destroy, "slurm_list_iterator_destroy", "list_iterator_destroy");
	void **list_var = _job_list_var();

	if (!w)
		return;
	/* The iterator belongs to the list it was made on: freed only while that list is live. */
	if (destroy && list_var && *list_var == w->list)
		((itr_destroy_fn_t) destroy)(w->itr);
	free(w);
}

int cellsched_job_walk_next(cellsched_job_walk_t *w, int pending_only,
			    int (*cb)(cellsched_job_t *job, void *arg), void *arg)
{
	SYM2(next, "slurm_list_next", "list_next");
	void **list_var = _job_list_var();
	job_record_t *job;

	if (!w || !cb || !next || !list_var || *list_var != w->list) {
		free(w); /* iterator left to its list */
		return -1;
	}
	if (_shutting_down()) {
		cellsched_job_walk_stop(w);
		return -1;
	}
	while ((job = ((itr_next_fn_t) next)(w->itr))) {
		if (pending_only && !IS_JOB_PENDING(job))
			continue;
		if (cb(job, arg))
			return 1;
	}
	cellsched_job_walk_stop(w);
	return 0;
}

cellsched_job_t *cellsched_find_job(uint32_t job_id)
{
	SYM(f, "find_job_record");
	if (!f)
		return NULL;
	return ((find_job_fn_t) f)(job_id);
}

/* ---- job record fields ---- */
#define DETAIL(job, field, dflt) (((job) && (job)->details) ? (job)->details->field : (dflt))

uint32_t cellsched_job_id(const cellsched_job_t *job) { return job->job_id; }
uint32_t cellsched_job_user_id(const cellsched_job_t *job) { return job->user_id; }
uint32_t cellsched_job_state(const cellsched_job_t *job) { return job->job_state; }
int cellsched_job_is_pending(const cellsched_job_t *job) { return IS_JOB_PENDING(job) ? 1 : 0; }
uint32_t cellsched_job_state_reason(const cellsched_job_t *job) { return job->state_reason; }
const char *cellsched_job_name(const cellsched_job_t *job) { return job->name; }
const char *cellsched_job_partition(const cellsched_job_t *job) { return job->partition; }
const char *cellsched_job_admin_comment(const cellsched_job_t *job) { return job->admin_comment; }
const char *cellsched_job_comment(const cellsched_job_t *job) { return job->comment; }
const char *cellsched_job_features(const cellsched_job_t *job) { return DETAIL(job, features, NULL); }
const char *cellsched_job_tres_per_node(const cellsched_job_t *job) { return job->tres_per_node; }
const char *cellsched_job_tres_req_str(const cellsched_job_t *job) { return job->tres_req_str; }
const char *cellsched_job_tres_alloc_str(const cellsched_job_t *job) { return job->tres_alloc_str; }
const char *cellsched_job_nodes(const cellsched_job_t *job) { return job->nodes; }
uint32_t cellsched_job_min_nodes(const cellsched_job_t *job) { return DETAIL(job, min_nodes, NO_VAL); }
uint32_t cellsched_job_max_nodes(const cellsched_job_t *job) { return DETAIL(job, max_nodes, NO_VAL); }
uint32_t cellsched_job_num_tasks(const cellsched_job_t *job) { return DETAIL(job, num_tasks, NO_VAL); }
uint32_t cellsched_job_time_limit(const cellsched_job_t *job) { return job->time_limit; }
uint32_t cellsched_job_priority(const cellsched_job_t *job) { return job->priority; }
uint32_t cellsched_job_site_factor(const cellsched_job_t *job) { return job->site_factor; }
int64_t cellsched_job_submit_time(const cellsched_job_t *job) { return (int64_t) DETAIL(job, submit_time, 0); }
int64_t cellsched_job_begin_time(const cellsched_job_t *job) { return (int64_t) DETAIL(job, begin_time, 0); }
int64_t cellsched_job_start_time(const cellsched_job_t *job) { return (int64_t) job->start_time; }

void cellsched_job_set_site_factor(cellsched_job_t *job, uint32_t factor)
{
	job->site_factor = factor;
}

typedef int (*list_for_each_fn_t)(void *, int (*)(void *, void *), void *);
typedef void (*bit_free_fn_t)(bitstr_t **);

/* One GRES request of a pending job: frees the per-node selection arrays
 * cons_tres's select_and_set filled at a test that fitted the job (they
 * are rebuilt, zeroed, at the next such test; only a test that allocates
 * reads them, right after filling them, under the same job write lock). */
static int _release_gres_select(void *x, void *arg)
{
	SYM(xf, "slurm_xfree");
	SYM2(bf, "slurm_bit_free", "bit_free");
	gres_state_t *gs = x;
	gres_job_state_t *js = gs ? gs->gres_data : NULL;
	uint64_t *freed = arg;
	uint32_t i;

	if (!js || !xf || !bf)
		return 0;
	if (js->gres_cnt_node_select) {
		*freed += (uint64_t) js->total_node_cnt * sizeof(uint64_t);
		((xfree_fn_t) xf)((void **) &js->gres_cnt_node_select);
	}
	if (js->gres_bit_select) {
		for (i = 0; i < js->total_node_cnt; i++) {
			if (js->gres_bit_select[i])
				((bit_free_fn_t) bf)(&js->gres_bit_select[i]);
		}
		*freed += (uint64_t) js->total_node_cnt * sizeof(bitstr_t *);
		((xfree_fn_t) xf)((void **) &js->gres_bit_select);
	}
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
	if (js->gres_per_bit_select) {
		for (i = 0; i < js->total_node_cnt; i++)
			((xfree_fn_t) xf)((void **) &js->gres_per_bit_select[i]);
		*freed += (uint64_t) js->total_node_cnt * sizeof(uint64_t *);
		((xfree_fn_t) xf)((void **) &js->gres_per_bit_select);
	}
#endif
	return 0;
}

uint64_t cellsched_job_release_gres_select(cellsched_job_t *job)
{
	SYM2(each, "slurm_list_for_each", "list_for_each");
	uint64_t freed = 0;

	if (!job || !each || !IS_JOB_PENDING(job) || !job->gres_list_req)
		return 0;
	((list_for_each_fn_t) each)(job->gres_list_req, _release_gres_select, &freed);
	return freed;
}

int cellsched_job_set_admin_comment(cellsched_job_t *job, const char *text)
{
	char *copy = NULL;
	if (text && !(copy = cellsched_xstrdup(text)))
		return -1;
	cellsched_xfree(job->admin_comment);
	job->admin_comment = copy;
	return 0;
}

uint32_t cellsched_job_env_count(const cellsched_job_t *job)
{
	return job->spank_job_env ? job->spank_job_env_size : 0;
}

const char *cellsched_job_env_at(const cellsched_job_t *job, uint32_t i)
{
	if (!job->spank_job_env || i >= job->spank_job_env_size)
		return NULL;
	return job->spank_job_env[i];
}

int cellsched_env_array_set(char ***env, uint32_t *size, const char *name, const char *value)
{
	SYM2(overwrite, "slurm_env_array_overwrite", "env_array_overwrite");
	uint32_t n = 0;
	if (!overwrite || !env || !size || !name || !value)
		return -1;
	if (!((env_overwrite_fn_t) overwrite)(env, name, value))
		return -1;
	/* envcount() is not exported by libslurm (client/SPANK side): count here. */
	while (*env && (*env)[n])
		n++;
	*size = n;
	return 0;
}

int cellsched_job_env_set(cellsched_job_t *job, const char *name, const char *value)
{
	return cellsched_env_array_set(&job->spank_job_env, &job->spank_job_env_size, name, value);
}

uint32_t cellsched_job_env_sup_count(const cellsched_job_t *job)
{
	if (!job || !job->details || !job->details->env_sup)
		return 0;
	return job->details->env_cnt;
}

const char *cellsched_job_env_sup_at(const cellsched_job_t *job, uint32_t i)
{
	if (i >= cellsched_job_env_sup_count(job))
		return NULL;
	return job->details->env_sup[i];
}

int cellsched_job_env_sup_set(cellsched_job_t *job, const char *name, const char *value)
{
	SYM(xrecalloc, "slurm_xrecalloc");
	/* struct job_details (22.05) / anonymous job_details_t (24.11): take the field's type. */
	__typeof__(job->details) d;
	size_t nlen, vlen;
	char *entry;
	uint32_t i;

	if (!job || !(d = job->details) || !name || !value || !*name || strchr(name, '='))
		return -1;
	nlen = strlen(name);
	vlen = strlen(value);
	if (!(entry = _xzalloc(nlen + vlen + 2)))
		return -1;
	memcpy(entry, name, nlen);
	entry[nlen] = '=';
	memcpy(entry + nlen + 1, value, vlen);

	for (i = 0; d->env_sup && i < d->env_cnt; i++) {
		if (d->env_sup[i] && !strncmp(d->env_sup[i], name, nlen) && d->env_sup[i][nlen] == '=') {
			cellsched_xfree(d->env_sup[i]);
			d->env_sup[i] = entry;
			return 0;
		}
	}
	/* env_cnt is a uint16_t; keep the array NULL-terminated as unpack makes it. */
	if (!xrecalloc || d->env_cnt >= UINT16_MAX - 1) {
		cellsched_xfree(entry);
		return -1;
	}
	((xrecalloc_fn_t) xrecalloc)((void **) &d->env_sup, (size_t) d->env_cnt + 2, sizeof(char *), true, false,
				     __FILE__, __LINE__, __func__);
	if (!d->env_sup) {
		d->env_cnt = 0;
		cellsched_xfree(entry);
		return -1;
	}
	d->env_sup[d->env_cnt++] = entry;
	d->env_sup[d->env_cnt] = NULL;
	return 0;
}

int cellsched_job_is_batch(const cellsched_job_t *job)
{
	return (job && job->batch_flag) ? 1 : 0;
}

uint32_t cellsched_job_exit_code(const cellsched_job_t *job) { return job->exit_code; }
uint32_t cellsched_job_restart_cnt(const cellsched_job_t *job) { return job->restart_cnt; }
int cellsched_job_requeue_allowed(const cellsched_job_t *job) { return DETAIL(job, requeue, 0) ? 1 : 0; }
int64_t cellsched_job_end_time(const cellsched_job_t *job) { return (int64_t) job->end_time; }

static node_record_t *_node(int i);
typedef int (*bit_test_fn_t)(bitstr_t *, bitoff_t);
typedef bitoff_t (*bit_size_fn_t)(bitstr_t *);

int cellsched_job_awaits_registration(const cellsched_job_t *job)
{
	SYM2(bt, "slurm_bit_test", "bit_test");
	SYM2(bs, "slurm_bit_size", "bit_size");
	SYM(cnt, "node_record_count");
	bitoff_t i, n;

	if (!job->node_bitmap)
		return 0;
	if (!bt || !bs || !cnt)
		return 1;
	n = ((bit_size_fn_t) bs)(job->node_bitmap);
	if (n > *(int *) cnt)
		n = *(int *) cnt;
	for (i = 0; i < n; i++) {
		node_record_t *node;
		if (!((bit_test_fn_t) bt)(job->node_bitmap, i))
			continue;
		/* slurmd_start_time comes only with a registration: a restarted
		 * slurmctld recovers the node table without it. */
		node = _node((int) i);
		if (node && !node->slurmd_start_time && !IS_NODE_DOWN(node) &&
		    !IS_NODE_NO_RESPOND(node))
			return 1;
	}
	return 0;
}

/* ---- signal and requeue, as root (uid 0), under the caller's write locks ---- */
int cellsched_job_signal(uint32_t job_id, uint16_t signal)
{
	SYM(f, "job_signal_id");
	if (!f)
		return -1;
	/* KILL_FULL_JOB: the batch script and every step, as `scancel --full`. */
	return ((job_signal_id_fn_t) f)(job_id, signal, KILL_FULL_JOB, 0, false);
}

int cellsched_job_requeue(uint32_t job_id)
{
	SYM(f, "job_requeue");
	if (!f)
		return -1;
	/* Not a preemption: accounting shows REQUEUED; no reply message. */
	return ((job_requeue_fn_t) f)(0, job_id, NULL, false, 0);
}

/* ---- updates through update_job() ---- */
void cellsched_job_update_init(cellsched_job_update_t *u, uint32_t job_id)
{
	memset(u, 0, sizeof(*u));
	u->job_id = job_id;
	u->min_nodes = NO_VAL;
	u->max_nodes = NO_VAL;
	u->num_tasks = NO_VAL;
	u->time_limit = NO_VAL;
	u->begin_time = 0;
}

int cellsched_update_job(const cellsched_job_update_t *u)
{
	SYM(update, "update_job");
	SYM2(desc_init, "slurm_init_job_desc_msg", "slurm_init_job_desc_msg");
	SYM2(desc_free, "slurm_free_job_desc_msg", "slurm_free_job_desc_msg");
	SYM2(msg_init, "slurm_msg_t_init", "slurm_msg_t_init");
	SYM(prepend, "gres_prepend_tres_type");
	job_desc_msg_t *desc;
	slurm_msg_t msg;
	int rc;

	if (!u || !update || !desc_init || !desc_free || !msg_init)
		return -1;
	if (!(desc = _xzalloc(sizeof(*desc))))
		return -1;
	((desc_fn_t) desc_init)(desc);
	desc->job_id = u->job_id;
	if (u->features)
		desc->features = cellsched_xstrdup(u->features);
	if (u->admin_comment)
		desc->admin_comment = cellsched_xstrdup(u->admin_comment);
	if (u->gres) {
		/* "gpu:4" -> "gres:gpu:4" (22.05) / "gres/gpu:4" (23.02+), as scontrol does. */
		if (!prepend) {
			((desc_fn_t) desc_free)(desc);
			return -1;
		}
		desc->tres_per_node = ((strdup_fn_t) prepend)(u->gres);
		if (!desc->tres_per_node)
			desc->tres_per_node = cellsched_xstrdup("");
	}
	desc->min_nodes = u->min_nodes;
	desc->max_nodes = u->max_nodes;
	desc->num_tasks = u->num_tasks;
	desc->time_limit = u->time_limit;
	if (u->begin_time > 0)
		desc->begin_time = (time_t) u->begin_time;

	((msg_init_fn_t) msg_init)(&msg);
	msg.msg_type = REQUEST_UPDATE_JOB;
	msg.data = desc;
	rc = ((update_job_fn_t) update)(&msg, 0, false);
	((desc_fn_t) desc_free)(desc);
	return rc;
}

/* ---- node table ---- */
static node_record_t *_node(int i)
{
	SYM(tbl, "node_record_table_ptr");
	SYM(cnt, "node_record_count");
	node_record_t **t;
	if (!tbl || !cnt || i < 0 || i >= *(int *) cnt)
		return NULL;
	t = *(node_record_t ***) tbl;
	return t ? t[i] : NULL;
}

int cellsched_node_count(void)
{
	SYM(cnt, "node_record_count");
	return cnt ? *(int *) cnt : 0;
}

const char *cellsched_node_name(int i)
{
	node_record_t *n = _node(i);
	return n ? n->name : NULL;
}

const char *cellsched_node_features(int i)
{
	node_record_t *n = _node(i);
	if (!n)
		return NULL;
	if (n->features_act)
		return n->features_act;
	if (n->features)
		return n->features;
	return n->config_ptr ? n->config_ptr->feature : NULL;
}

const char *cellsched_node_gres(int i)
{
	node_record_t *n = _node(i);
	if (!n)
		return NULL;
	if (n->gres)
		return n->gres;
	return n->config_ptr ? n->config_ptr->gres : NULL;
}

uint32_t cellsched_node_state(int i)
{
	node_record_t *n = _node(i);
	return n ? n->node_state : 0;
}

int cellsched_node_is_available(int i)
{
	node_record_t *n = _node(i);
	if (!n || !n->name)
		return 0;
	if (IS_NODE_UNKNOWN(n) || IS_NODE_DOWN(n) || IS_NODE_DRAIN(n) ||
	    IS_NODE_FUTURE(n) || IS_NODE_NO_RESPOND(n))
		return 0;
	return (n->node_state & NODE_STATE_FAIL) ? 0 : 1;
}

uint16_t cellsched_node_cpus(int i)
{
	node_record_t *n = _node(i);
	return n ? n->cpus : 0;
}

char *cellsched_node_gres_used(int i)
{
	SYM(f, "gres_get_node_used");
	node_record_t *n = _node(i);
	if (!n || !f || !n->gres_list)
		return NULL;
	return ((gres_str_fn_t) f)(n->gres_list);
}

int64_t cellsched_last_node_update(void)
{
	SYM(v, "last_node_update");
	return v ? (int64_t) *(time_t *) v : -1;
}
