// SPDX-License-Identifier: GPL-2.0
/*
 * prio-advanced: the advanced priority scheduler of study 5, as a blk-mq
 * elevator. The basic scheduler's levels, dispatch list and aging (see
 * prio-iosched.c), plus:
 *
 * - a sequential/random detector (Listing 5): a request starting within
 *   seq_gap_sectors of where the previous one ended raises the sequential
 *   score, any other the random score, each lowering the other; the mode is
 *   sequential while the sequential score is not below the random one, and a
 *   random mode ends the batch in progress. As in the study there is one
 *   detector for the queue (per_task_detector 0); with per_task_detector 1
 *   each submitting task has its own (the study's stated limitation lifted:
 *   its two jobs interleaved look random to one detector);
 * - media-aware selection (Listings 6-7): on flash a level is served from its
 *   FIFO head; on a rotational disk in sector order from the end of the last
 *   dispatch, wrapping to the lowest sector, unless the level's FIFO head
 *   waited hdd_fifo_expire;
 * - batching: after a request dispatched in sequential mode, up to seq_batch
 *   requests in a row come from the same level (aging still goes first);
 * - merging (Listing 8): bios merge only in sequential mode (the submitting
 *   task's, with per_task_detector), only into a request of the same level,
 *   back or front, through the block layer's merge helpers; a request leaves
 *   the FIFO, the sector tree and the merge hash together (Listing 9).
 *
 * Written for qoslab from the study's description; the defaults are those of
 * the simulator's twin (crates/block/src/sched/prio_advanced.rs).
 *
 * sysfs, queue/iosched/: aging_expire (ms), hdd_fifo_expire (ms),
 * seq_gap_sectors, seq_batch, per_task_detector; read only:
 * {high,normal,low}_dispatched, aged_dispatches, expired_dispatches,
 * batched_dispatches, head_dispatches, bio_merges, sequential (the mode).
 */
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <trace/events/block.h>

#include "elevator.h"
#include "blk.h"
#include "blk-mq.h"
#include "blk-mq-sched.h"

#include "prio-common.h"

#define PADV_AGING_EXPIRE_MS	500
#define PADV_HDD_FIFO_EXPIRE_MS	200
#define PADV_SEQ_GAP_SECTORS	256
#define PADV_SEQ_BATCH		8
#define PADV_MAX_EXPIRE_MS	3600000
#define PADV_MAX_SEQ_BATCH	1024
/* Submitting tasks followed at once with per_task_detector; the least recently
 * seen one is forgotten for a new one.
 */
#define PADV_FLOWS		16

struct padv_detector {
	sector_t last_end;	/* 0: nothing seen yet (Listing 5) */
	unsigned int seq_score;
	unsigned int rand_score;
};

struct padv_flow {
	pid_t pid;
	u64 used;
	struct padv_detector det;
};

struct padv_data {
	spinlock_t lock;	/* everything below, and the merge hash */
	struct list_head dispatch;
	struct list_head fifo[PRIO_LEVELS];
	struct rb_root sort[PRIO_LEVELS];

	unsigned long aging_expire;
	unsigned long hdd_fifo_expire;
	unsigned int seq_gap_sectors;
	unsigned int seq_batch;
	unsigned int per_task_detector;

	struct padv_detector det;
	struct padv_flow flows[PADV_FLOWS];
	u64 flow_clock;

	sector_t last_sector;
	int batch_level;
	unsigned int batching;

	u64 dispatched[PRIO_LEVELS];
	u64 aged;
	u64 expired;
	u64 batched;
	u64 head;
	u64 merges;
};

static inline pid_t padv_rq_pid(struct request *rq)
{
	return (pid_t)(uintptr_t)rq->elv.priv[0];
}

static bool padv_sequential(const struct padv_detector *det)
{
	return det->seq_score >= det->rand_score;
}

/* The detector of task @pid; a new one replaces the least recently used. */
static struct padv_flow *padv_flow(struct padv_data *d, pid_t pid, bool create)
{
	struct padv_flow *f, *lru = &d->flows[0];
	int i;

	for (i = 0; i < PADV_FLOWS; i++) {
		f = &d->flows[i];
		if (f->used && f->pid == pid) {
			f->used = ++d->flow_clock;
			return f;
		}
		if (f->used < lru->used)
			lru = f;
	}
	if (!create)
		return NULL;
	memset(lru, 0, sizeof(*lru));
	lru->pid = pid;
	lru->used = ++d->flow_clock;
	return lru;
}

/* Whether requests of task @pid are treated as sequential now. */
static bool padv_mode_sequential(struct padv_data *d, pid_t pid)
{
	struct padv_flow *f;

	if (!d->per_task_detector)
		return padv_sequential(&d->det);
	f = padv_flow(d, pid, false);
	return f && padv_sequential(&f->det);
}

/* Listing 5: the gap between this request's start and the last one's end. */
static void padv_observe(struct padv_data *d, struct request *rq)
{
	struct padv_detector *det = &d->det;
	sector_t pos = blk_rq_pos(rq);
	sector_t end = pos + blk_rq_sectors(rq);
	sector_t gap;

	if (d->per_task_detector)
		det = &padv_flow(d, padv_rq_pid(rq), true)->det;
	if (!det->last_end) {
		det->last_end = end;
		return;
	}
	gap = pos >= det->last_end ? pos - det->last_end : det->last_end - pos;
	if (gap <= d->seq_gap_sectors) {
		det->seq_score++;
		if (det->rand_score)
			det->rand_score--;
	} else {
		det->rand_score++;
		if (det->seq_score)
			det->seq_score--;
	}
	if (!d->per_task_detector && !padv_sequential(det))
		d->batching = 0;
	det->last_end = end;
}

/* Listing 9: out of the FIFO, the sector tree and the merge hash together. */
static void padv_remove(struct request_queue *q, struct padv_data *d,
			struct request *rq)
{
	enum prio_level level = prio_level_of(rq->ioprio);

	list_del_init(&rq->queuelist);
	if (!RB_EMPTY_NODE(&rq->rb_node))
		elv_rb_del(&d->sort[level], rq);
	if (!hlist_unhashed(&rq->hash))
		elv_rqhash_del(q, rq);
	if (q->last_merge == rq)
		q->last_merge = NULL;
}

static void padv_insert_requests(struct blk_mq_hw_ctx *hctx,
				 struct list_head *list, bool at_head)
{
	struct request_queue *q = hctx->queue;
	struct padv_data *d = q->elevator->elevator_data;
	enum prio_level level;
	struct request *rq;

	spin_lock(&d->lock);
	while (!list_empty(list)) {
		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		/* As the kernel's own schedulers do: blktrace's "I". */
		trace_block_rq_insert(rq);
		rq->fifo_time = jiffies;
		if (at_head) {
			list_add(&rq->queuelist, &d->dispatch);
			continue;
		}
		level = prio_level_of(rq->ioprio);
		padv_observe(d, rq);
		elv_rb_add(&d->sort[level], rq);
		if (rq_mergeable(rq)) {
			elv_rqhash_add(q, rq);
			if (!q->last_merge)
				q->last_merge = rq;
		}
		list_add_tail(&rq->queuelist, &d->fifo[level]);
	}
	spin_unlock(&d->lock);
}

static int padv_aged_level(struct padv_data *d)
{
	struct request *rq;
	int level, found = -1;
	u64 oldest = 0;

	for (level = PRIO_NORMAL; level < PRIO_LEVELS; level++) {
		rq = list_first_entry_or_null(&d->fifo[level], struct request,
					      queuelist);
		if (!rq || !prio_waited(rq->fifo_time, d->aging_expire))
			continue;
		if (found < 0 || time_before((unsigned long)rq->fifo_time,
					     (unsigned long)oldest)) {
			found = level;
			oldest = rq->fifo_time;
		}
	}
	return found;
}

/* The first request of @root at or after @sector, in sector order. */
static struct request *padv_from_sector(struct rb_root *root, sector_t sector)
{
	struct rb_node *node = root->rb_node;
	struct request *rq, *found = NULL;

	while (node) {
		rq = rb_entry_rq(node);
		if (blk_rq_pos(rq) >= sector) {
			found = rq;
			node = node->rb_left;
		} else {
			node = node->rb_right;
		}
	}
	return found;
}

/* Listings 6 and 7: the request level @level offers next. */
static struct request *padv_pick(struct request_queue *q, struct padv_data *d,
				 int level)
{
	struct request *head, *rq;
	struct rb_node *node;

	head = list_first_entry_or_null(&d->fifo[level], struct request,
					queuelist);
	if (!head || blk_queue_nonrot(q))
		return head;
	if (prio_waited(head->fifo_time, d->hdd_fifo_expire)) {
		d->expired++;
		return head;
	}
	rq = padv_from_sector(&d->sort[level], d->last_sector);
	if (!rq) {
		node = rb_first(&d->sort[level]);
		rq = node ? rb_entry_rq(node) : head;
	}
	return rq;
}

static struct request *padv_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct request_queue *q = hctx->queue;
	struct padv_data *d = q->elevator->elevator_data;
	struct request *rq;
	int level;

	spin_lock(&d->lock);
	rq = list_first_entry_or_null(&d->dispatch, struct request, queuelist);
	if (rq) {
		list_del_init(&rq->queuelist);
		d->head++;
		goto out;
	}
	level = padv_aged_level(d);
	if (level >= 0) {
		d->aged++;
		d->batching = 0;
	} else if (d->batching > 0 && d->batching < d->seq_batch &&
		   !list_empty(&d->fifo[d->batch_level])) {
		d->batched++;
		level = d->batch_level;
	} else {
		d->batching = 0;
		for (level = PRIO_HIGH; level < PRIO_LEVELS; level++)
			if (!list_empty(&d->fifo[level]))
				break;
		if (level == PRIO_LEVELS)
			goto out;
	}
	rq = padv_pick(q, d, level);
	padv_remove(q, d, rq);
	d->dispatched[level]++;
	if (padv_mode_sequential(d, padv_rq_pid(rq))) {
		if (!d->batching || d->batch_level != level) {
			d->batch_level = level;
			d->batching = 0;
		}
		d->batching++;
	} else {
		d->batching = 0;
	}
out:
	if (rq)
		d->last_sector = blk_rq_pos(rq) + blk_rq_sectors(rq);
	spin_unlock(&d->lock);
	return rq;
}

static bool padv_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct padv_data *d = hctx->queue->elevator->elevator_data;
	int level;

	if (!list_empty_careful(&d->dispatch))
		return true;
	for (level = 0; level < PRIO_LEVELS; level++)
		if (!list_empty_careful(&d->fifo[level]))
			return true;
	return false;
}

/* The submitting task, for the per-task detector (runs in its context). */
static void padv_prepare_request(struct request *rq)
{
	rq->elv.priv[0] = (void *)(uintptr_t)task_pid_nr(current);
}

/* Listing 8: only requests and bios of one level merge. */
static bool padv_allow_merge(struct request_queue *q, struct request *rq,
			     struct bio *bio)
{
	return prio_level_of(rq->ioprio) == prio_level_of(bio_prio(bio));
}

static bool padv_bio_merge(struct request_queue *q, struct bio *bio,
			   unsigned int nr_segs)
{
	struct padv_data *d = q->elevator->elevator_data;
	struct request *free = NULL;
	bool ret = false;

	spin_lock(&d->lock);
	if (padv_mode_sequential(d, task_pid_nr(current))) {
		ret = blk_mq_sched_try_merge(q, bio, nr_segs, &free);
		if (ret)
			d->merges++;
	}
	spin_unlock(&d->lock);
	if (free)
		blk_mq_free_request(free);
	return ret;
}

/* A front merge: a queued request of the bio's level starting where it ends. */
static int padv_request_merge(struct request_queue *q, struct request **rq,
			      struct bio *bio)
{
	struct padv_data *d = q->elevator->elevator_data;
	struct request *found;

	found = elv_rb_find(&d->sort[prio_level_of(bio_prio(bio))],
			    bio_end_sector(bio));
	if (found && elv_bio_merge_ok(found, bio)) {
		*rq = found;
		return ELEVATOR_FRONT_MERGE;
	}
	return ELEVATOR_NO_MERGE;
}

/* A front merge moved the request's first sector: re-sort it. */
static void padv_request_merged(struct request_queue *q, struct request *rq,
				enum elv_merge type)
{
	struct padv_data *d = q->elevator->elevator_data;
	struct rb_root *root = &d->sort[prio_level_of(rq->ioprio)];

	if (type == ELEVATOR_FRONT_MERGE) {
		elv_rb_del(root, rq);
		elv_rb_add(root, rq);
	}
}

/* @next joined @rq and goes away; @rq keeps the older FIFO place of the two. */
static void padv_requests_merged(struct request_queue *q, struct request *rq,
				 struct request *next)
{
	struct padv_data *d = q->elevator->elevator_data;

	if (prio_level_of(rq->ioprio) == prio_level_of(next->ioprio) &&
	    time_before((unsigned long)next->fifo_time,
			(unsigned long)rq->fifo_time)) {
		list_move(&rq->queuelist, &next->queuelist);
		rq->fifo_time = next->fifo_time;
	}
	padv_remove(q, d, next);
}

static int padv_init_sched(struct request_queue *q, struct elevator_type *e)
{
	struct elevator_queue *eq;
	struct padv_data *d;
	int level;

	eq = elevator_alloc(q, e);
	if (!eq)
		return -ENOMEM;
	d = kzalloc_node(sizeof(*d), GFP_KERNEL, q->node);
	if (!d) {
		kobject_put(&eq->kobj);
		return -ENOMEM;
	}
	spin_lock_init(&d->lock);
	INIT_LIST_HEAD(&d->dispatch);
	for (level = 0; level < PRIO_LEVELS; level++) {
		INIT_LIST_HEAD(&d->fifo[level]);
		d->sort[level] = RB_ROOT;
	}
	d->aging_expire = msecs_to_jiffies(PADV_AGING_EXPIRE_MS);
	d->hdd_fifo_expire = msecs_to_jiffies(PADV_HDD_FIFO_EXPIRE_MS);
	d->seq_gap_sectors = PADV_SEQ_GAP_SECTORS;
	d->seq_batch = PADV_SEQ_BATCH;
	eq->elevator_data = d;
	q->elevator = eq;
	return 0;
}

static void padv_exit_sched(struct elevator_queue *e)
{
	struct padv_data *d = e->elevator_data;
	int level;

	WARN_ON_ONCE(!list_empty(&d->dispatch));
	for (level = 0; level < PRIO_LEVELS; level++)
		WARN_ON_ONCE(!list_empty(&d->fifo[level]));
	kfree(d);
}

PRIO_SHOW_MS(padv, struct padv_data, aging_expire)
PRIO_STORE_MS(padv, struct padv_data, aging_expire, PADV_MAX_EXPIRE_MS)
PRIO_SHOW_MS(padv, struct padv_data, hdd_fifo_expire)
PRIO_STORE_MS(padv, struct padv_data, hdd_fifo_expire, PADV_MAX_EXPIRE_MS)
PRIO_SHOW_UINT(padv, struct padv_data, seq_gap_sectors)
PRIO_STORE_UINT(padv, struct padv_data, seq_gap_sectors, 0, UINT_MAX)
PRIO_SHOW_UINT(padv, struct padv_data, seq_batch)
PRIO_STORE_UINT(padv, struct padv_data, seq_batch, 1, PADV_MAX_SEQ_BATCH)
PRIO_SHOW_UINT(padv, struct padv_data, per_task_detector)
PRIO_STORE_UINT(padv, struct padv_data, per_task_detector, 0, 1)
PRIO_SHOW_COUNTER(padv, struct padv_data, high_dispatched,
		  READ_ONCE(d->dispatched[PRIO_HIGH]))
PRIO_SHOW_COUNTER(padv, struct padv_data, normal_dispatched,
		  READ_ONCE(d->dispatched[PRIO_NORMAL]))
PRIO_SHOW_COUNTER(padv, struct padv_data, low_dispatched,
		  READ_ONCE(d->dispatched[PRIO_LOW]))
PRIO_SHOW_COUNTER(padv, struct padv_data, aged_dispatches, READ_ONCE(d->aged))
PRIO_SHOW_COUNTER(padv, struct padv_data, expired_dispatches,
		  READ_ONCE(d->expired))
PRIO_SHOW_COUNTER(padv, struct padv_data, batched_dispatches,
		  READ_ONCE(d->batched))
PRIO_SHOW_COUNTER(padv, struct padv_data, head_dispatches, READ_ONCE(d->head))
PRIO_SHOW_COUNTER(padv, struct padv_data, bio_merges, READ_ONCE(d->merges))
PRIO_SHOW_COUNTER(padv, struct padv_data, sequential,
		  padv_sequential(&d->det))

#define PADV_RW(name) \
	__ATTR(name, 0644, padv_##name##_show, padv_##name##_store)
#define PADV_RO(name) __ATTR(name, 0444, padv_##name##_show, NULL)

static struct elv_fs_entry padv_attrs[] = {
	PADV_RW(aging_expire),
	PADV_RW(hdd_fifo_expire),
	PADV_RW(seq_gap_sectors),
	PADV_RW(seq_batch),
	PADV_RW(per_task_detector),
	PADV_RO(high_dispatched),
	PADV_RO(normal_dispatched),
	PADV_RO(low_dispatched),
	PADV_RO(aged_dispatches),
	PADV_RO(expired_dispatches),
	PADV_RO(batched_dispatches),
	PADV_RO(head_dispatches),
	PADV_RO(bio_merges),
	PADV_RO(sequential),
	__ATTR_NULL
};

static struct elevator_type padv_sched = {
	.ops = {
		.init_sched = padv_init_sched,
		.exit_sched = padv_exit_sched,
		.prepare_request = padv_prepare_request,
		.insert_requests = padv_insert_requests,
		.dispatch_request = padv_dispatch_request,
		.has_work = padv_has_work,
		.allow_merge = padv_allow_merge,
		.bio_merge = padv_bio_merge,
		.request_merge = padv_request_merge,
		.request_merged = padv_request_merged,
		.requests_merged = padv_requests_merged,
		.next_request = elv_rb_latter_request,
		.former_request = elv_rb_former_request,
	},
	.elevator_attrs = padv_attrs,
	.elevator_name = "prio-advanced",
	.elevator_owner = THIS_MODULE,
};

static int __init padv_init(void)
{
	return elv_register(&padv_sched);
}

static void __exit padv_exit(void)
{
	elv_unregister(&padv_sched);
}

module_init(padv_init);
module_exit(padv_exit);

MODULE_AUTHOR("qoslab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Study 5's advanced priority I/O scheduler: detector, media-aware selection, batching, merging");
