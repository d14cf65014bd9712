// SPDX-License-Identifier: GPL-2.0
/*
 * prio: the basic priority scheduler of study 5, as a blk-mq elevator.
 *
 * Three FIFOs, HIGH, NORMAL and LOW, filled from each request's I/O priority
 * by the study's mapping (prio-common.h). A request inserted at the head (a
 * requeue) goes to a dispatch list that is served before everything else.
 * Then a NORMAL or LOW request whose FIFO head waited aging_expire goes first
 * (the older of the two heads); otherwise HIGH before NORMAL before LOW, each
 * in arrival order. Nothing is merged or sorted.
 *
 * Written for qoslab from the study's description (Listings 1-4); its default
 * aging_expire is the simulator's (500 ms, mq-deadline's read_expire).
 *
 * sysfs, queue/iosched/:
 *   aging_expire        ms a NORMAL or LOW request waits before it goes first
 *   {high,normal,low}_dispatched, aged_dispatches, head_dispatches  (read only)
 */
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <trace/events/block.h>

#include "elevator.h"
#include "blk.h"
#include "blk-mq.h"
#include "blk-mq-sched.h"

#include "prio-common.h"

#define PRIO_AGING_EXPIRE_MS	500
#define PRIO_MAX_EXPIRE_MS	3600000

struct prio_data {
	spinlock_t lock;	/* guards everything below */
	struct list_head dispatch;
	struct list_head fifo[PRIO_LEVELS];
	unsigned long aging_expire;

	u64 dispatched[PRIO_LEVELS];
	u64 aged;
	u64 head;
};

static struct request *prio_pop(struct list_head *list)
{
	struct request *rq = list_first_entry_or_null(list, struct request,
						      queuelist);

	if (rq)
		list_del_init(&rq->queuelist);
	return rq;
}

static void prio_insert_requests(struct blk_mq_hw_ctx *hctx,
				 struct list_head *list, bool at_head)
{
	struct prio_data *d = hctx->queue->elevator->elevator_data;
	struct request *rq;

	spin_lock(&d->lock);
	while (!list_empty(list)) {
		rq = list_first_entry(list, struct request, queuelist);
		list_del_init(&rq->queuelist);
		/* As the kernel's own schedulers do: blktrace's "I". */
		trace_block_rq_insert(rq);
		rq->fifo_time = jiffies;
		if (at_head)
			list_add(&rq->queuelist, &d->dispatch);
		else
			list_add_tail(&rq->queuelist,
				      &d->fifo[prio_level_of(rq->ioprio)]);
	}
	spin_unlock(&d->lock);
}

/* The NORMAL or LOW level whose head waited aging_expire, the older first. */
static int prio_aged_level(struct prio_data *d)
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

static struct request *prio_dispatch_request(struct blk_mq_hw_ctx *hctx)
{
	struct prio_data *d = hctx->queue->elevator->elevator_data;
	struct request *rq;
	int level;

	spin_lock(&d->lock);
	rq = prio_pop(&d->dispatch);
	if (rq) {
		d->head++;
		goto out;
	}
	level = prio_aged_level(d);
	if (level >= 0) {
		d->aged++;
	} else {
		for (level = PRIO_HIGH; level < PRIO_LEVELS; level++)
			if (!list_empty(&d->fifo[level]))
				break;
		if (level == PRIO_LEVELS)
			goto out;
	}
	rq = prio_pop(&d->fifo[level]);
	d->dispatched[level]++;
out:
	spin_unlock(&d->lock);
	return rq;
}

static bool prio_has_work(struct blk_mq_hw_ctx *hctx)
{
	struct prio_data *d = hctx->queue->elevator->elevator_data;
	int level;

	if (!list_empty_careful(&d->dispatch))
		return true;
	for (level = 0; level < PRIO_LEVELS; level++)
		if (!list_empty_careful(&d->fifo[level]))
			return true;
	return false;
}

static int prio_init_sched(struct request_queue *q, struct elevator_type *e)
{
	struct elevator_queue *eq;
	struct prio_data *d;
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
	for (level = 0; level < PRIO_LEVELS; level++)
		INIT_LIST_HEAD(&d->fifo[level]);
	d->aging_expire = msecs_to_jiffies(PRIO_AGING_EXPIRE_MS);
	eq->elevator_data = d;
	q->elevator = eq;
	return 0;
}

static void prio_exit_sched(struct elevator_queue *e)
{
	struct prio_data *d = e->elevator_data;
	int level;

	WARN_ON_ONCE(!list_empty(&d->dispatch));
	for (level = 0; level < PRIO_LEVELS; level++)
		WARN_ON_ONCE(!list_empty(&d->fifo[level]));
	kfree(d);
}

PRIO_SHOW_MS(prio, struct prio_data, aging_expire)
PRIO_STORE_MS(prio, struct prio_data, aging_expire, PRIO_MAX_EXPIRE_MS)
PRIO_SHOW_COUNTER(prio, struct prio_data, high_dispatched,
		  READ_ONCE(d->dispatched[PRIO_HIGH]))
PRIO_SHOW_COUNTER(prio, struct prio_data, normal_dispatched,
		  READ_ONCE(d->dispatched[PRIO_NORMAL]))
PRIO_SHOW_COUNTER(prio, struct prio_data, low_dispatched,
		  READ_ONCE(d->dispatched[PRIO_LOW]))
PRIO_SHOW_COUNTER(prio, struct prio_data, aged_dispatches, READ_ONCE(d->aged))
PRIO_SHOW_COUNTER(prio, struct prio_data, head_dispatches, READ_ONCE(d->head))

static struct elv_fs_entry prio_attrs[] = {
	__ATTR(aging_expire, 0644, prio_aging_expire_show,
	       prio_aging_expire_store),
	__ATTR(high_dispatched, 0444, prio_high_dispatched_show, NULL),
	__ATTR(normal_dispatched, 0444, prio_normal_dispatched_show, NULL),
	__ATTR(low_dispatched, 0444, prio_low_dispatched_show, NULL),
	__ATTR(aged_dispatches, 0444, prio_aged_dispatches_show, NULL),
	__ATTR(head_dispatches, 0444, prio_head_dispatches_show, NULL),
	__ATTR_NULL
};

static struct elevator_type prio_sched = {
	.ops = {
		.init_sched = prio_init_sched,
		.exit_sched = prio_exit_sched,
		.insert_requests = prio_insert_requests,
		.dispatch_request = prio_dispatch_request,
		.has_work = prio_has_work,
	},
	.elevator_attrs = prio_attrs,
	.elevator_name = "prio",
	.elevator_owner = THIS_MODULE,
};

static int __init prio_init(void)
{
	return elv_register(&prio_sched);
}

static void __exit prio_exit(void)
{
	elv_unregister(&prio_sched);
}

module_init(prio_init);
module_exit(prio_exit);

MODULE_AUTHOR("qoslab");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Study 5's basic priority I/O scheduler: three FIFOs with aging");
