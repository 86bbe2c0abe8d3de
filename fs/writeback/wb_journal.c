/*
 * The journal of an area: <landing>/.datavo-journal/<xxh3-128 of the
 * path>, one small text file per path with something to do:
 *
 *   datavo-journal/1
 *   op put|delete
 *   size BYTES
 *   mtime NANOSECONDS
 *   path dir/name
 *
 * An entry is written beside its final name, fsync'd, renamed over it and
 * the directory fsync'd: a crash leaves the old entry or the new one,
 * never half of one. The newest operation on a path replaces the older
 * (one name per path). Leftover temporary files are removed at load.
 */
#include "wb_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "config/log.h"

#define MAGIC "datavo-journal/1\n"
#define ENTRY_MAX 8192
#define TMP_PREFIX "tmp."

static void entry_name(const char *rel, char *buf, size_t len)
{
	XXH128_hash_t h = XXH3_128bits(rel, strlen(rel));

	snprintf(buf, len, "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64,
		 (uint64_t)h.low64);
}

int dv_wb_journal_open(struct wb_area *a)
{
	if (mkdirat(a->dirfd, WB_JOURNAL_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	a->jfd = openat(a->dirfd, WB_JOURNAL_DIR, O_RDONLY | O_DIRECTORY |
				  O_CLOEXEC);
	return a->jfd < 0 ? -errno : 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int dv_wb_journal_put(struct wb_area *a, const struct wb_file *f)
{
	char name[40], tmp[48], text[ENTRY_MAX];
	int fd, len, ret;

	entry_name(f->rel, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s", name);
	len = snprintf(text, sizeof(text),
		       MAGIC "op %s\nsize %" PRIu64 "\nmtime %" PRId64 "\npath %s\n",
		       f->op == WB_OP_PUT ? "put" : "delete", f->size,
		       f->mtime_ns, f->rel);
	if (len < 0 || (size_t)len >= sizeof(text))
		return -ENAMETOOLONG;
	fd = openat(a->jfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	ret = write_all(fd, text, (size_t)len);
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (ret == 0 && renameat(a->jfd, tmp, a->jfd, name) < 0)
		ret = -errno;
	if (ret == 0 && fsync(a->jfd) < 0)
		ret = -errno;
	if (ret) {
		unlinkat(a->jfd, tmp, 0);
		dv_err("write-back '%s': cannot journal %s: %s", a->cfg->name,
		       f->rel, strerror(-ret));
	}
	return ret;
}

void dv_wb_journal_drop(struct wb_area *a, const char *rel)
{
	char name[40];

	entry_name(rel, name, sizeof(name));
	if (unlinkat(a->jfd, name, 0) < 0 && errno != ENOENT)
		dv_warn("write-back '%s': cannot remove the journal entry of %s: %s",
			a->cfg->name, rel, strerror(errno));
}

/* One entry's fields; 0, or -EINVAL for a malformed one. */
static int parse_entry(char *text, enum wb_op *op, uint64_t *size,
		       int64_t *mtime, char **rel)
{
	char opname[16];
	char *p;
	int used = 0;

	if (strncmp(text, MAGIC, strlen(MAGIC)) != 0)
		return -EINVAL;
	p = text + strlen(MAGIC);
	if (sscanf(p, "op %15s\nsize %" SCNu64 "\nmtime %" SCNd64 "\n%n",
		   opname, size, mtime, &used) != 3 || used == 0)
		return -EINVAL;
	p += used;
	if (strncmp(p, "path ", 5) != 0)
		return -EINVAL;
	p += 5;
	*rel = p;
	p = strchr(p, '\n');
	if (!p || p == *rel)
		return -EINVAL;
	*p = '\0';
	if (strcmp(opname, "put") == 0)
		*op = WB_OP_PUT;
	else if (strcmp(opname, "delete") == 0)
		*op = WB_OP_DELETE;
	else
		return -EINVAL;
	return 0;
}

static void load_one(struct wb_area *a, const char *name, dv_wb_journal_fn fn)
{
	char text[ENTRY_MAX + 1];
	enum wb_op op;
	uint64_t size;
	int64_t mtime;
	char *rel;
	ssize_t n;
	int fd = openat(a->jfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, text, ENTRY_MAX);
	close(fd);
	if (n < 0)
		return;
	text[n] = '\0';
	if (parse_entry(text, &op, &size, &mtime, &rel)) {
		dv_warn("write-back '%s': journal entry %s is malformed; ignored",
			a->cfg->name, name);
		return;
	}
	fn(a, op, rel, size, mtime);
}

int dv_wb_journal_load(struct wb_area *a, dv_wb_journal_fn fn)
{
	int fd = dup(a->jfd);
	struct dirent *de;
	DIR *d;
	int ret = dv_wb_opendir(fd, &d);

	if (ret)
		return ret;
	rewinddir(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0)
			unlinkat(a->jfd, de->d_name, 0);
		else
			load_one(a, de->d_name, fn);
	}
	closedir(d);
	return 0;
}
