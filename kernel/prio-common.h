/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the two priority schedulers of study 5 share: the study's mapping of an
 * I/O priority to three levels, and the sysfs plumbing of their tunables.
 *
 * Written for qoslab from the study's description (its Listings 1-9), for the
 * elevator interface of Linux 6.1.
 */
#ifndef QOSLAB_PRIO_COMMON_H
#define QOSLAB_PRIO_COMMON_H

#include <linux/ioprio.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>

enum prio_level {
	PRIO_HIGH,
	PRIO_NORMAL,
	PRIO_LOW,
	PRIO_LEVELS,
};

/* Best-effort levels up to this one are HIGH, from PRIO_BE_LOW_MIN on LOW. */
#define PRIO_BE_HIGH_MAX	2
#define PRIO_BE_LOW_MIN		6

/*
 * The study's mapping: RT and best effort 0-2 are HIGH, best effort 3-5 and a
 * request without a class NORMAL, best effort 6-7 and IDLE LOW.
 */
static inline enum prio_level prio_level_of(unsigned short ioprio)
{
	unsigned int level = IOPRIO_PRIO_DATA(ioprio);

	switch (IOPRIO_PRIO_CLASS(ioprio)) {
	case IOPRIO_CLASS_RT:
		return PRIO_HIGH;
	case IOPRIO_CLASS_IDLE:
		return PRIO_LOW;
	case IOPRIO_CLASS_NONE:
		return PRIO_NORMAL;
	default:
		if (level <= PRIO_BE_HIGH_MAX)
			return PRIO_HIGH;
		if (level >= PRIO_BE_LOW_MIN)
			return PRIO_LOW;
		return PRIO_NORMAL;
	}
}

/* Whether a request stamped at @stamp (jiffies) has waited @expire jiffies. */
static inline bool prio_waited(u64 stamp, unsigned long expire)
{
	return time_after_eq(jiffies, (unsigned long)stamp + expire);
}

/*
 * sysfs: a tunable in milliseconds kept in jiffies, a plain unsigned number,
 * and a read-only counter. @type is the scheduler's private data type, @e the
 * elevator_queue of the show and store functions.
 */
#define PRIO_SHOW_MS(prefix, type, field)				\
static ssize_t prefix##_##field##_show(struct elevator_queue *e, char *page) \
{									\
	type *d = e->elevator_data;					\
									\
	return sysfs_emit(page, "%u\n", jiffies_to_msecs(d->field));	\
}

#define PRIO_STORE_MS(prefix, type, field, max_ms)			\
static ssize_t prefix##_##field##_store(struct elevator_queue *e,	\
					const char *page, size_t count)	\
{									\
	type *d = e->elevator_data;					\
	unsigned int ms;						\
	int ret = kstrtouint(page, 10, &ms);				\
									\
	if (ret)							\
		return ret;						\
	if (ms > (max_ms))						\
		return -EINVAL;						\
	d->field = msecs_to_jiffies(ms);				\
	return count;							\
}

#define PRIO_SHOW_UINT(prefix, type, field)				\
static ssize_t prefix##_##field##_show(struct elevator_queue *e, char *page) \
{									\
	type *d = e->elevator_data;					\
									\
	return sysfs_emit(page, "%u\n", d->field);			\
}

#define PRIO_STORE_UINT(prefix, type, field, min, max)			\
static ssize_t prefix##_##field##_store(struct elevator_queue *e,	\
					const char *page, size_t count)	\
{									\
	type *d = e->elevator_data;					\
	unsigned int v;							\
	int ret = kstrtouint(page, 10, &v);				\
									\
	if (ret)							\
		return ret;						\
	if (v < (min) || v > (max))					\
		return -EINVAL;						\
	d->field = v;							\
	return count;							\
}

#define PRIO_SHOW_COUNTER(prefix, type, name, expr)			\
static ssize_t prefix##_##name##_show(struct elevator_queue *e, char *page) \
{									\
	type *d = e->elevator_data;					\
									\
	return sysfs_emit(page, "%llu\n", (unsigned long long)(expr));	\
}

#endif /* QOSLAB_PRIO_COMMON_H */
