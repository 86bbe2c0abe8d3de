/*
 * Keeping a landing folder within max_bytes: synced files that nobody has
 * open for writing and that have nothing queued are removed, least
 * recently used first (atime, else mtime), until the folder is within its
 * budget, less what a caller needs. A file that is not yet in the
 * destination is never removed, so a full folder of unsynced files fails
 * writes with ENOSPC (wb_fuse.c) and keeps every closed file.
 */
#include "wb_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"

struct cand {
	char *rel;
	uint64_t size;
	time_t used;
};

struct scan {
	struct cand *c;
	size_t n, cap;
	uint64_t total;
};

static int scan_dir(struct wb_area *a, const char *dir, struct scan *s,
		    int depth)
{
	char rel[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int fd, ret;
	DIR *d;

	if (depth > 64)
		return 0;
	fd = openat(a->dirfd, *dir ? dir : ".", O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC);
	ret = dv_wb_opendir(fd, &d);
	if (ret)
		return ret;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (!*dir && strcmp(de->d_name, WB_JOURNAL_DIR) == 0))
			continue;
		if (dv_wb_join(rel, sizeof(rel), dir, de->d_name) ||
		    fstatat(a->dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			scan_dir(a, rel, s, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		s->total += (uint64_t)st.st_blocks * 512;
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 64;
			struct cand *c = realloc(s->c, cap * sizeof(*c));

			if (!c)
				continue;
			s->c = c;
			s->cap = cap;
		}
		s->c[s->n].rel = strdup(rel);
		s->c[s->n].size = (uint64_t)st.st_blocks * 512;
		s->c[s->n].used = st.st_atime > st.st_mtime ? st.st_atime :
							      st.st_mtime;
		if (s->c[s->n].rel)
			s->n++;
	}
	closedir(d);
	return 0;
}

static int by_use(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	return (a->used > b->used) - (a->used < b->used);
}

/* Whether @rel may go: synced, closed, nothing queued. */
static bool evictable(struct wb_area *a, const char *rel)
{
	char state[64];

	if (dv_wb_queue_writers(a, rel))
		return false;
	dv_wb_queue_state(a, rel, false, state, sizeof(state));
	return strcmp(state, "synced") == 0;
}

uint64_t dv_wb_queue_evict(struct wb_area *a, uint64_t want)
{
	struct scan s = { 0 };
	uint64_t freed = 0, budget = a->cfg->max_bytes;
	size_t i;

	if (!budget && !want)
		return 0;
	scan_dir(a, "", &s, 0);
	/* Within max_bytes, and @want (a write that hit ENOSPC) below that. */
	if (!budget || budget > s.total)
		budget = s.total;
	budget = budget > want ? budget - want : 0;
	qsort(s.c, s.n, sizeof(*s.c), by_use);
	for (i = 0; i < s.n && s.total - freed > budget; i++) {
		if (!evictable(a, s.c[i].rel))
			continue;
		if (unlinkat(a->dirfd, s.c[i].rel, 0) == 0) {
			freed += s.c[i].size;
			pthread_mutex_lock(&a->lock);
			a->st.evicted_files++;
			pthread_mutex_unlock(&a->lock);
			dv_info("write-back '%s': evicted %s (synced)",
				a->cfg->name, s.c[i].rel);
		}
	}
	for (i = 0; i < s.n; i++)
		free(s.c[i].rel);
	free(s.c);
	return freed;
}
