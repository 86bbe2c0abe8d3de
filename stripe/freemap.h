/*
 * The free map: which chunk slots of each device hold no committed object.
 * One bit per slot, set when used. Rebuilt from the index at open (a slot
 * no entry names is free), so it is never written to disk. No locking: the
 * stripe tier serializes calls.
 */
#ifndef DV_STRIPE_FREEMAP_H
#define DV_STRIPE_FREEMAP_H

#include <stdbool.h>
#include <stdint.h>

struct dv_freemap_dev {
	uint64_t *bits;
	uint64_t nslots;
	uint64_t nfree;
	uint64_t cursor; /* next-fit: where the last search ended */
};

struct dv_freemap {
	struct dv_freemap_dev *dev;
	unsigned ndev;
	uint64_t nfree; /* over all devices */
};

/* @nslots[i] slots on device i, all free. 0 or -ENOMEM. */
int dv_freemap_init(struct dv_freemap *fm, unsigned ndev,
		    const uint64_t *nslots);
void dv_freemap_release(struct dv_freemap *fm);

/*
 * Takes a free slot, preferring device @want, then the following devices
 * in order. Returns the slot and sets *@dev, or -1 when every device is full.
 */
int64_t dv_freemap_alloc(struct dv_freemap *fm, unsigned want, unsigned *dev);

/* Marks a slot used (replay). false if it was used already or is out of range. */
bool dv_freemap_take(struct dv_freemap *fm, unsigned dev, uint64_t slot);

/* Frees a used slot. */
void dv_freemap_put(struct dv_freemap *fm, unsigned dev, uint64_t slot);

#endif
