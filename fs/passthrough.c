/*
 * Backing ids by inode (see passthrough.h). A small hash table under one
 * mutex: it is touched on open and release only, never on read.
 */
#include "passthrough.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#ifdef FUSE_CAP_PASSTHROUGH

#define BUCKETS 256

struct backing {
	struct backing *next;
	uint64_t ino;
	int id;
	unsigned refs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct backing *table[BUCKETS]; /* protected by lock */

static struct backing **slot(uint64_t ino)
{
	struct backing **pp = &table[ino % BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

int dv_backing_get(fuse_req_t req, uint64_t ino, int fd)
{
	struct backing **pp, *b;
	int id;

	pthread_mutex_lock(&lock);
	pp = slot(ino);
	if (*pp) {
		(*pp)->refs++;
		id = (*pp)->id;
		goto out;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		id = -ENOMEM;
		goto out;
	}
	id = fuse_passthrough_open(req, fd);
	if (id <= 0) {
		free(b);
		id = id < 0 ? id : -EIO;
		goto out;
	}
	b->ino = ino;
	b->id = id;
	b->refs = 1;
	*pp = b;
out:
	pthread_mutex_unlock(&lock);
	return id;
}

void dv_backing_put(fuse_req_t req, uint64_t ino)
{
	struct backing **pp, *b;

	pthread_mutex_lock(&lock);
	pp = slot(ino);
	b = *pp;
	if (b && --b->refs == 0) {
		*pp = b->next;
		fuse_passthrough_close(req, b->id);
		free(b);
	}
	pthread_mutex_unlock(&lock);
}

#else /* libfuse without passthrough: never asked for */

int dv_backing_get(fuse_req_t req, uint64_t ino, int fd)
{
	return -ENOTSUP;
}

void dv_backing_put(fuse_req_t req, uint64_t ino)
{
}

#endif
