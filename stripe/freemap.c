/* Chunk slot allocation from a bitmap per device (freemap.h). */
#include "freemap.h"

#include <errno.h>
#include <stdlib.h>

int dv_freemap_init(struct dv_freemap *fm, unsigned ndev,
		    const uint64_t *nslots)
{
	fm->ndev = ndev;
	fm->nfree = 0;
	fm->dev = calloc(ndev ? ndev : 1, sizeof(*fm->dev));
	if (!fm->dev)
		return -ENOMEM;
	for (unsigned i = 0; i < ndev; i++) {
		struct dv_freemap_dev *d = &fm->dev[i];

		d->bits = calloc((size_t)(nslots[i] / 64 + 1), sizeof(uint64_t));
		if (!d->bits) {
			dv_freemap_release(fm);
			return -ENOMEM;
		}
		d->nslots = d->nfree = nslots[i];
		fm->nfree += nslots[i];
	}
	return 0;
}

void dv_freemap_release(struct dv_freemap *fm)
{
	for (unsigned i = 0; fm->dev && i < fm->ndev; i++)
		free(fm->dev[i].bits);
	free(fm->dev);
	fm->dev = NULL;
	fm->ndev = 0;
}

static bool used(const struct dv_freemap_dev *d, uint64_t s)
{
	return (d->bits[s / 64] >> (s % 64)) & 1;
}

/* The first free slot at or after the cursor, wrapping once. */
static int64_t find_free(struct dv_freemap_dev *d)
{
	uint64_t words = d->nslots / 64 + 1;
	uint64_t w = d->cursor / 64;

	for (uint64_t k = 0; k <= words; k++, w = (w + 1) % words) {
		uint64_t free_bits = ~d->bits[w];

		while (free_bits) {
			uint64_t s = w * 64 + (uint64_t)__builtin_ctzll(free_bits);

			if (s < d->nslots)
				return (int64_t)s;
			free_bits &= free_bits - 1;
		}
	}
	return -1;
}

int64_t dv_freemap_alloc(struct dv_freemap *fm, unsigned want, unsigned *dev)
{
	for (unsigned k = 0; k < fm->ndev; k++) {
		unsigned i = (want + k) % fm->ndev;
		struct dv_freemap_dev *d = &fm->dev[i];
		int64_t s;

		if (d->nfree == 0)
			continue;
		s = find_free(d);
		if (s < 0)
			continue;
		dv_freemap_take(fm, i, (uint64_t)s);
		d->cursor = (uint64_t)s + 1 < d->nslots ? (uint64_t)s + 1 : 0;
		*dev = i;
		return s;
	}
	return -1;
}

bool dv_freemap_take(struct dv_freemap *fm, unsigned dev, uint64_t slot)
{
	struct dv_freemap_dev *d;

	if (dev >= fm->ndev || slot >= fm->dev[dev].nslots)
		return false;
	d = &fm->dev[dev];
	if (used(d, slot))
		return false;
	d->bits[slot / 64] |= 1ULL << (slot % 64);
	d->nfree--;
	fm->nfree--;
	return true;
}

void dv_freemap_put(struct dv_freemap *fm, unsigned dev, uint64_t slot)
{
	struct dv_freemap_dev *d;

	if (dev >= fm->ndev || slot >= fm->dev[dev].nslots)
		return;
	d = &fm->dev[dev];
	if (!used(d, slot))
		return;
	d->bits[slot / 64] &= ~(1ULL << (slot % 64));
	d->nfree++;
	fm->nfree++;
}
