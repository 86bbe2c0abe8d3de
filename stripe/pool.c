/*
 * Assembling, formatting and owning a stripe pool (pool.h).
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "engine.h"

#define WIPE_BYTES (1u << 20) /* head and tail zeroed at format */

/* ---- devices ---- */

struct devinfo {
	uint64_t bytes;
	dev_t dev;    /* st_rdev of a block device, st_dev of a file */
	ino_t ino;    /* 0 for a block device */
};

static int device_size(int fd, const struct stat *st, struct devinfo *di)
{
	int lbs = 512;

	if (!S_ISBLK(st->st_mode)) {
		di->bytes = (uint64_t)st->st_size;
		di->dev = st->st_dev;
		di->ino = st->st_ino;
		return 0;
	}
	if (ioctl(fd, BLKGETSIZE64, &di->bytes) || ioctl(fd, BLKSSZGET, &lbs))
		return -errno;
	if (lbs > (int)DV_STRIPE_ALIGN)
		return -EINVAL;
	di->dev = st->st_rdev;
	di->ino = 0;
	return 0;
}

/* Opens one device for O_DIRECT I/O and takes it for this process. */
static int open_device(const char *path, struct devinfo *di, char *err,
		       size_t errlen)
{
	struct stat st;
	int fd, flags = O_RDWR | O_DIRECT | O_CLOEXEC;

	if (stat(path, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (S_ISBLK(st.st_mode))
		flags |= O_EXCL;
	fd = open(path, flags);
	if (fd < 0 && errno == EINVAL && S_ISREG(st.st_mode)) {
		dv_warn("%s: its filesystem refuses O_DIRECT; using buffered I/O",
			path);
		fd = open(path, flags & ~O_DIRECT);
	}
	if (fd < 0) {
		int ret = -errno;

		snprintf(err, errlen, "%s: %s", path,
			 errno == EBUSY ? "busy (mounted, claimed, or used by another datavofs)" :
					  strerror(errno));
		return ret;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int ret = errno == EWOULDBLOCK ? -EBUSY : -errno;

		snprintf(err, errlen, "%s: in use by another datavofs", path);
		close(fd);
		return ret;
	}
	if (fstat(fd, &st) || device_size(fd, &st, di)) {
		int ret = errno ? -errno : -EINVAL;

		snprintf(err, errlen, "%s: cannot read its size or its sector size is above 4096",
			 path);
		close(fd);
		return ret;
	}
	return fd;
}

static int read_sb(int fd, struct dv_stripe_sb *sb)
{
	void *buf = dv_stripe_buf_alloc(DV_STRIPE_SB_BYTES);
	int ret;

	if (!buf)
		return -ENOMEM;
	if (pread(fd, buf, DV_STRIPE_SB_BYTES, 0) != DV_STRIPE_SB_BYTES)
		ret = -EIO;
	else
		ret = dv_stripe_sb_decode(buf, DV_STRIPE_SB_BYTES, sb);
	free(buf);
	return ret;
}

static int write_sb(int fd, const struct dv_stripe_sb *sb)
{
	void *buf = dv_stripe_buf_alloc(DV_STRIPE_SB_BYTES);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	dv_stripe_sb_encode(sb, buf);
	if (pwrite(fd, buf, DV_STRIPE_SB_BYTES, 0) != DV_STRIPE_SB_BYTES)
		ret = errno ? -errno : -EIO;
	else if (fdatasync(fd))
		ret = -errno;
	free(buf);
	return ret;
}

/* Zeroes [@off, @off + @len) (aligned) so no old signature survives. */
static int zero_range(int fd, uint64_t off, uint64_t len)
{
	void *buf = dv_stripe_buf_alloc(WIPE_BYTES);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	memset(buf, 0, WIPE_BYTES);
	while (len && !ret) {
		size_t n = len < WIPE_BYTES ? (size_t)len : WIPE_BYTES;

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			ret = errno ? -errno : -EIO;
		off += n;
		len -= n;
	}
	free(buf);
	return ret;
}

/* ---- assembly ---- */

/* True when the superblocks make one pool of these @n devices. */
static bool assemble(struct dv_stripe_pool *p, const int *sbret,
		     const struct devinfo *di, uint64_t chunk)
{
	bool seen[DV_STRIPE_MAX_DEVICES] = { false };

	for (unsigned i = 0; i < p->ndev; i++) {
		const struct dv_stripe_sb *sb = &p->sb[i];

		if (sbret[i] || sb->dev_count != p->ndev ||
		    sb->chunk_bytes != chunk || seen[sb->dev_index] ||
		    memcmp(sb->pool_id, p->sb[0].pool_id, DV_STRIPE_ID_BYTES) ||
		    sb->data_offset + sb->nslots * chunk > di[i].bytes)
			return false;
		seen[sb->dev_index] = true;
	}
	return true;
}

/* Puts devices in superblock order. */
static void reorder(struct dv_stripe_pool *p)
{
	int fds[DV_STRIPE_MAX_DEVICES];
	char *paths[DV_STRIPE_MAX_DEVICES];
	struct dv_stripe_sb sb[DV_STRIPE_MAX_DEVICES];

	for (unsigned i = 0; i < p->ndev; i++) {
		unsigned k = p->sb[i].dev_index;

		fds[k] = p->fds[i];
		paths[k] = p->paths[i];
		sb[k] = p->sb[i];
	}
	memcpy(p->fds, fds, sizeof(fds[0]) * p->ndev);
	memcpy(p->paths, paths, sizeof(paths[0]) * p->ndev);
	memcpy(p->sb, sb, sizeof(sb[0]) * p->ndev);
}

static int random_id(uint8_t *id)
{
	if (getrandom(id, DV_STRIPE_ID_BYTES, 0) != DV_STRIPE_ID_BYTES)
		return -EIO;
	return 0;
}

static int format(struct dv_stripe_pool *p, const struct devinfo *di,
		  uint64_t chunk, char *err, size_t errlen)
{
	uint8_t pool_id[DV_STRIPE_ID_BYTES];
	int ret = random_id(pool_id);

	for (unsigned i = 0; i < p->ndev && !ret; i++) {
		struct dv_stripe_sb *sb = &p->sb[i];
		uint64_t end = di[i].bytes & ~(uint64_t)(DV_STRIPE_ALIGN - 1);
		uint64_t head = end < WIPE_BYTES ? end : WIPE_BYTES;

		memset(sb, 0, sizeof(*sb));
		sb->version = DV_STRIPE_VERSION;
		memcpy(sb->pool_id, pool_id, DV_STRIPE_ID_BYTES);
		sb->dev_index = i;
		sb->dev_count = p->ndev;
		sb->chunk_bytes = chunk;
		sb->data_offset = DV_STRIPE_DATA_OFFSET;
		sb->nslots = dv_stripe_nslots(di[i].bytes, sb->data_offset, chunk);
		sb->created = (uint64_t)time(NULL);
		ret = zero_range(p->fds[i], 0, head);
		if (!ret && end > head) {
			uint64_t tail = end - head < WIPE_BYTES ? end - head :
								   WIPE_BYTES;

			ret = zero_range(p->fds[i], end - tail, tail);
		}
		if (!ret)
			ret = write_sb(p->fds[i], sb);
		if (ret)
			snprintf(err, errlen, "%s: cannot format it: %s",
				 p->paths[i], strerror(-ret));
	}
	p->created = ret == 0;
	return ret;
}

/* Points every superblock at journal @id, durably. */
static int adopt_journal(struct dv_stripe_pool *p, const uint8_t *id)
{
	for (unsigned i = 0; i < p->ndev; i++) {
		int ret;

		memcpy(p->sb[i].journal_id, id, DV_STRIPE_ID_BYTES);
		ret = write_sb(p->fds[i], &p->sb[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* True when every superblock names the same, non-zero journal. */
static bool journal_agreed(const struct dv_stripe_pool *p)
{
	static const uint8_t zero[DV_STRIPE_ID_BYTES];

	if (memcmp(p->sb[0].journal_id, zero, DV_STRIPE_ID_BYTES) == 0)
		return false;
	for (unsigned i = 1; i < p->ndev; i++) {
		if (memcmp(p->sb[i].journal_id, p->sb[0].journal_id,
			   DV_STRIPE_ID_BYTES))
			return false;
	}
	return true;
}

static int open_index(struct dv_stripe_pool *p, const char *name,
		      struct dv_stripe_index *ix, char *err, size_t errlen)
{
	struct dv_stripe_journal_hdr want = { .chunk_bytes = p->chunk_bytes };
	char path[PATH_MAX];
	int ret;

	memcpy(want.pool_id, p->sb[0].pool_id, DV_STRIPE_ID_BYTES);
	memcpy(want.journal_id, p->sb[0].journal_id, DV_STRIPE_ID_BYTES);
	snprintf(path, sizeof(path), "%s/journal", p->state_dir);
	ret = -ENOENT;
	if (!p->created && journal_agreed(p))
		ret = dv_stripe_index_load(ix, path, &want);
	if (ret == 0)
		return 0;
	if (ret != -ENOENT && ret != -EBADMSG) {
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (!p->created)
		dv_warn("tier '%s': no index for its pool in %s: starting empty",
			name, p->state_dir);
	ret = random_id(want.journal_id);
	if (!ret)
		ret = dv_stripe_index_create(ix, path, &want);
	if (!ret) {
		ret = adopt_journal(p, want.journal_id);
		if (ret)
			dv_stripe_index_close(ix);
	}
	if (ret)
		snprintf(err, errlen, "cannot start an index in %s: %s",
			 p->state_dir, strerror(-ret));
	return ret;
}

static int open_devices(struct dv_stripe_pool *p, char *const *paths,
			struct devinfo *di, char *err, size_t errlen)
{
	for (unsigned i = 0; i < p->ndev; i++) {
		int fd = open_device(paths[i], &di[i], err, errlen);

		if (fd < 0)
			return fd;
		p->fds[i] = fd;
		p->paths[i] = strdup(paths[i]);
		if (!p->paths[i])
			return -ENOMEM;
		for (unsigned j = 0; j < i; j++) {
			if (di[j].dev == di[i].dev && di[j].ino == di[i].ino) {
				snprintf(err, errlen, "%s and %s are the same device",
					 paths[j], paths[i]);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int dv_stripe_pool_open(struct dv_stripe_pool *p, char *const *paths, size_t n,
			uint64_t chunk_bytes, const char *state_base,
			const char *name, struct dv_stripe_index *ix, char *err,
			size_t errlen)
{
	struct devinfo di[DV_STRIPE_MAX_DEVICES];
	int sbret[DV_STRIPE_MAX_DEVICES];
	char id[2 * DV_STRIPE_ID_BYTES + 1];
	int ret;

	memset(p, 0, sizeof(*p));
	for (unsigned i = 0; i < DV_STRIPE_MAX_DEVICES; i++)
		p->fds[i] = -1;
	if (n == 0 || n > DV_STRIPE_MAX_DEVICES) {
		snprintf(err, errlen, "a stripe pool has 1 to %u devices, not %zu",
			 DV_STRIPE_MAX_DEVICES, n);
		return -EINVAL;
	}
	p->ndev = (unsigned)n;
	p->chunk_bytes = chunk_bytes;
	p->data_offset = DV_STRIPE_DATA_OFFSET;
	ret = open_devices(p, paths, di, err, errlen);
	for (unsigned i = 0; i < p->ndev && !ret; i++)
		sbret[i] = read_sb(p->fds[i], &p->sb[i]);
	if (!ret && assemble(p, sbret, di, chunk_bytes)) {
		reorder(p);
	} else if (!ret) {
		ret = format(p, di, chunk_bytes, err, errlen);
		if (!ret) {
			dv_stripe_id_hex(p->sb[0].pool_id, id);
			dv_info("tier '%s': formatted %u devices as stripe pool %s",
				name, p->ndev, id);
		}
	}
	if (ret)
		goto fail;
	dv_stripe_id_hex(p->sb[0].pool_id, id);
	if (asprintf(&p->state_dir, "%s/stripe-%s", state_base, id) < 0) {
		p->state_dir = NULL;
		ret = -ENOMEM;
		goto fail;
	}
	ret = dv_mkdir_p(p->state_dir, 0755);
	if (ret) {
		snprintf(err, errlen, "cannot create %s: %s", p->state_dir,
			 strerror(-ret));
		goto fail;
	}
	ret = open_index(p, name, ix, err, errlen);
	if (ret)
		goto fail;
	return 0;
fail:
	dv_stripe_pool_close(p);
	return ret;
}

void dv_stripe_pool_close(struct dv_stripe_pool *p)
{
	for (unsigned i = 0; i < DV_STRIPE_MAX_DEVICES; i++) {
		if (p->fds[i] >= 0)
			close(p->fds[i]);
		p->fds[i] = -1;
		free(p->paths[i]);
		p->paths[i] = NULL;
	}
	free(p->state_dir);
	p->state_dir = NULL;
}
