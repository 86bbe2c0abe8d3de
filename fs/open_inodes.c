/*
 * Open handles by inode (see open_inodes.h). A small hash table under one
 * mutex: it is touched on open and release only, never on read.
 */
#include "open_inodes.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define BUCKETS 256

struct open_inode {
	struct open_inode *next;
	uint64_t ino;
	unsigned opens;          /* open handles */
	unsigned backed;         /* of which use backing_id */
	int backing_id;          /* > 0 while backed > 0 */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct open_inode *table[BUCKETS]; /* protected by lock */

static struct open_inode **slot(uint64_t ino)
{
	struct open_inode **pp = &table[ino % BUCKETS];

	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

unsigned dv_inode_opens(uint64_t ino)
{
	unsigned n;

	pthread_mutex_lock(&lock);
	n = *slot(ino) ? (*slot(ino))->opens : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

int dv_inode_open(uint64_t ino)
{
	struct open_inode **pp, *e;
	int ret = 0;

	pthread_mutex_lock(&lock);
	pp = slot(ino);
	if (*pp) {
		(*pp)->opens++;
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		ret = -ENOMEM;
		goto out;
	}
	e->ino = ino;
	e->opens = 1;
	*pp = e;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

#ifdef FUSE_CAP_PASSTHROUGH
/*
 * libfuse returns 0 on failure and leaves the ioctl's errno: EPERM says the
 * kernel wants CAP_SYS_ADMIN, which fuse_ops.c tells from other errors.
 */
static int backing_open(fuse_req_t req, int fd)
{
	int id;

	errno = 0;
	id = fuse_passthrough_open(req, fd);
	if (id > 0)
		return id;
	return id < 0 ? id : errno ? -errno : -EIO;
}

static void backing_close(fuse_req_t req, int id)
{
	fuse_passthrough_close(req, id);
}
#else /* libfuse without passthrough: never asked for */
static int backing_open(fuse_req_t req, int fd)
{
	return -ENOTSUP;
}

static void backing_close(fuse_req_t req, int id)
{
}
#endif

int dv_inode_backing(fuse_req_t req, uint64_t ino, int fd)
{
	struct open_inode *e;
	int id;

	pthread_mutex_lock(&lock);
	e = *slot(ino);
	if (!e) {
		id = -EINVAL;
	} else if (e->backed > 0) {
		e->backed++;
		id = e->backing_id;
	} else if (e->opens > 1) {
		/* The kernel cannot mix cached and passthrough opens. */
		id = -EBUSY;
	} else {
		id = backing_open(req, fd);
		if (id > 0) {
			e->backing_id = id;
			e->backed = 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return id;
}

void dv_inode_close(fuse_req_t req, uint64_t ino, bool backed)
{
	struct open_inode **pp, *e;

	pthread_mutex_lock(&lock);
	pp = slot(ino);
	e = *pp;
	if (!e)
		goto out;
	if (backed && e->backed > 0 && --e->backed == 0) {
		backing_close(req, e->backing_id);
		e->backing_id = 0;
	}
	if (--e->opens == 0) {
		*pp = e->next;
		free(e);
	}
out:
	pthread_mutex_unlock(&lock);
}
