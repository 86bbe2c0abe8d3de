/*
 * The upload state of an area's paths and its uploaders.
 *
 * A path has a struct wb_file while it is open for writing or has an
 * operation to run (put or delete). A close by the last writer journals a
 * put (wb_journal.c) before it returns, then the put waits WB_SETTLE_MS
 * (a save to x.tmp renamed to x at once never uploads x.tmp) and an
 * uploader runs it. One operation at a time per path (busy); every change
 * of the path bumps its generation, and an operation that finishes under
 * an older generation does not count: the newer one runs next, so the
 * newest content wins. A synced put drops the journal entry and marks the
 * landing file (WB_SYNCED_XATTR = "size:mtime_ns"), which is how a later
 * mount knows the file is in the destination.
 *
 * Failures: transient ones (the destination down, timeouts) are tried
 * again forever, spaced by the network layer (dv_net_later_ms: doubling up to 30 s);
 * the others (refused, malformed) are failed: user.datavo.sync and
 * `datavoctl sync` say why, and they are tried again at the longest wait.
 * The list is linear: an area holds a few pending checkpoints, not
 * millions of paths.
 */
#include "wb_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/net/call.h"

int dv_wb_opendir(int fd, DIR **out)
{
	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		int err = -errno;

		close(fd);
		return err;
	}
	return 0;
}

int64_t dv_wb_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static bool under(const char *rel, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 0)
		return true;
	return strncmp(rel, dir, n) == 0 && (rel[n] == '\0' || rel[n] == '/');
}

/* Under a->lock. */
static struct wb_file *find(struct wb_area *a, const char *rel)
{
	struct wb_file *f;

	for (f = a->files; f; f = f->next) {
		if (strcmp(f->rel, rel) == 0)
			return f;
	}
	return NULL;
}

/* Under a->lock: the entry of @rel, made when missing. */
static struct wb_file *get(struct wb_area *a, const char *rel, bool remote)
{
	struct wb_file *f = find(a, rel);

	if (f)
		return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->rel = strdup(rel);
	if (!f->rel) {
		free(f);
		return NULL;
	}
	f->remote = remote;
	f->next = a->files;
	a->files = f;
	return f;
}

/* Under a->lock: frees @f when nothing holds it any more. */
static void maybe_drop(struct wb_area *a, struct wb_file *f)
{
	struct wb_file **p;

	if (f->busy || f->writers || f->journalled || f->state == WB_FAILED)
		return;
	for (p = &a->files; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			free(f->rel);
			free(f);
			return;
		}
	}
}

/* Under a->lock: @f now has @op to run, journalled. */
static int schedule(struct wb_area *a, struct wb_file *f, enum wb_op op,
		    uint64_t size, int64_t mtime)
{
	f->op = op;
	f->size = size;
	f->mtime_ns = mtime;
	f->gen++;
	f->journalled = true;
	f->state = WB_PENDING;
	f->attempts = 0;
	f->reason[0] = '\0';
	f->since = time(NULL);
	f->not_before = dv_wb_now_ms() + (op == WB_OP_PUT ? WB_SETTLE_MS : 0);
	pthread_cond_broadcast(&a->cond);
	return dv_wb_journal_put(a, f);
}

int dv_wb_queue_writer(struct wb_area *a, const char *rel, bool fresh)
{
	struct wb_file *f;
	int ret = 0;

	pthread_mutex_lock(&a->lock);
	f = get(a, rel, !fresh);
	if (f) {
		f->writers++;
		f->gen++;
	} else {
		ret = -ENOMEM;
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void dv_wb_queue_writer_done(struct wb_area *a, const char *rel)
{
	struct wb_file *f;

	pthread_mutex_lock(&a->lock);
	f = find(a, rel);
	if (f && f->writers > 0)
		f->writers--;
	if (f && f->writers == 0) {
		pthread_cond_broadcast(&a->cond);
		maybe_drop(a, f);
	}
	pthread_mutex_unlock(&a->lock);
}

unsigned dv_wb_queue_writers(struct wb_area *a, const char *rel)
{
	struct wb_file *f;
	unsigned n;

	pthread_mutex_lock(&a->lock);
	f = find(a, rel);
	n = f ? f->writers : 0;
	pthread_mutex_unlock(&a->lock);
	return n;
}

int dv_wb_queue_closed(struct wb_area *a, const char *rel,
		       const struct stat *st)
{
	struct wb_file *f;
	int ret;

	pthread_mutex_lock(&a->lock);
	f = get(a, rel, false);
	if (!f) {
		ret = -ENOMEM;
	} else if (f->journalled && f->op == WB_OP_PUT && !f->busy &&
		   f->state == WB_PENDING && f->size == (uint64_t)st->st_size &&
		   f->mtime_ns == mtime_ns(st)) {
		ret = 0; /* the same close again (a dup'd descriptor) */
	} else {
		ret = schedule(a, f, WB_OP_PUT, (uint64_t)st->st_size,
			       mtime_ns(st));
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/* Under a->lock: @rel is gone locally; the destination must follow. */
static int gone(struct wb_area *a, const char *rel)
{
	struct wb_file *f = get(a, rel, true);

	if (!f)
		return -ENOMEM;
	if (!f->remote && !f->busy) {
		/* Never uploaded: nothing to delete. */
		f->journalled = false;
		f->state = WB_SYNCED;
		f->gen++;
		dv_wb_journal_drop(a, rel);
		maybe_drop(a, f);
		return 0;
	}
	return schedule(a, f, WB_OP_DELETE, 0, 0);
}

int dv_wb_queue_unlinked(struct wb_area *a, const char *rel)
{
	int ret;

	pthread_mutex_lock(&a->lock);
	ret = gone(a, rel);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

/* Under a->lock: the file now at @to came from @from. */
static int moved_file(struct wb_area *a, const char *from, const char *to)
{
	struct wb_file *src = find(a, from);
	struct wb_file *dst = get(a, to, true);
	unsigned writers = src ? src->writers : 0;
	bool closed = src && src->journalled && src->op == WB_OP_PUT;
	struct stat st;
	int ret;

	if (!dst)
		return -ENOMEM;
	if (src)
		src->writers = 0;
	dst->writers += writers;
	if (fstatat(a->dirfd, to, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	ret = gone(a, from);
	if (ret)
		return ret;
	if (writers && !closed) {
		dst->gen++;
		return 0; /* its close will queue it */
	}
	return schedule(a, dst, WB_OP_PUT, (uint64_t)st.st_size,
			mtime_ns(&st));
}

struct rename_walk {
	char **from, **to;
	size_t n, cap;
};

static int walk_add(struct rename_walk *w, const char *from, const char *to)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		char **f = realloc(w->from, cap * sizeof(*f));
		char **t;

		if (!f)
			return -ENOMEM;
		w->from = f;
		t = realloc(w->to, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		w->to = t;
		w->cap = cap;
	}
	w->from[w->n] = strdup(from);
	w->to[w->n] = strdup(to);
	if (!w->from[w->n] || !w->to[w->n]) {
		free(w->from[w->n]);
		free(w->to[w->n]);
		return -ENOMEM;
	}
	w->n++;
	return 0;
}

/* Every regular file under @to (a directory just renamed from @from). */
static int walk_dir(struct wb_area *a, const char *from, const char *to,
		    struct rename_walk *w, int depth);

int dv_wb_queue_renamed(struct wb_area *a, const char *from, const char *to)
{
	struct rename_walk w = { 0 };
	struct stat st;
	size_t i;
	int ret = 0;

	if (fstatat(a->dirfd, to, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		ret = walk_dir(a, from, to, &w, 0);
	else if (S_ISREG(st.st_mode))
		ret = walk_add(&w, from, to);
	pthread_mutex_lock(&a->lock);
	for (i = 0; ret == 0 && i < w.n; i++)
		ret = moved_file(a, w.from[i], w.to[i]);
	pthread_mutex_unlock(&a->lock);
	for (i = 0; i < w.n; i++) {
		free(w.from[i]);
		free(w.to[i]);
	}
	free(w.from);
	free(w.to);
	return ret;
}

static int walk_dir(struct wb_area *a, const char *from, const char *to,
		    struct rename_walk *w, int depth)
{
	char f2[PATH_MAX], t2[PATH_MAX];
	struct dirent *de;
	int fd, ret = 0;
	DIR *d;

	if (depth > 64)
		return -ELOOP;
	fd = openat(a->dirfd, to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ret = dv_wb_opendir(fd, &d);
	if (ret)
		return ret;
	while (ret == 0 && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (dv_wb_join(f2, sizeof(f2), from, de->d_name) ||
		    dv_wb_join(t2, sizeof(t2), to, de->d_name)) {
			ret = -ENAMETOOLONG;
			break;
		}
		if (de->d_type == DT_DIR)
			ret = walk_dir(a, f2, t2, w, depth + 1);
		else if (de->d_type == DT_REG)
			ret = walk_add(w, f2, t2);
	}
	closedir(d);
	return ret;
}

static const char *state_word(enum wb_state s)
{
	switch (s) {
	case WB_PENDING:
		return "pending";
	case WB_UPLOADING:
		return "uploading";
	case WB_SYNCED:
		return "synced";
	case WB_FAILED:
		return "failed";
	}
	return "?";
}

/* Whether the landing file carries the mark of its own bytes' upload. */
static bool marked_synced(struct wb_area *a, const char *rel)
{
	char path[PATH_MAX], want[64], have[64];
	struct stat st;
	ssize_t n;

	if (fstatat(a->dirfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", a->dirfd, rel);
	n = getxattr(path, WB_SYNCED_XATTR, have, sizeof(have) - 1);
	if (n < 0)
		return false;
	have[n] = '\0';
	snprintf(want, sizeof(want), "%" PRIu64 ":%" PRId64,
		 (uint64_t)st.st_size, mtime_ns(&st));
	return strcmp(have, want) == 0;
}

static void file_state(struct wb_area *a, struct wb_file *f, const char *rel,
		       char *buf, size_t len)
{
	if (f && f->state == WB_FAILED) {
		snprintf(buf, len, "failed: %s", f->reason);
	} else if (f && (f->journalled || f->writers)) {
		snprintf(buf, len, "%s", state_word(f->state));
	} else if (marked_synced(a, rel)) {
		snprintf(buf, len, "synced");
	} else {
		snprintf(buf, len, "failed: %s",
			 "never closed (the daemon stopped while it was open for writing)");
	}
}

void dv_wb_queue_state(struct wb_area *a, const char *rel, bool is_dir,
		       char *buf, size_t len)
{
	struct wb_file *f, *worst = NULL;
	int rank, worst_rank = 0;

	pthread_mutex_lock(&a->lock);
	if (!is_dir) {
		file_state(a, find(a, rel), rel, buf, len);
		pthread_mutex_unlock(&a->lock);
		return;
	}
	for (f = a->files; f; f = f->next) {
		if (!under(f->rel, rel) || !f->journalled)
			continue;
		rank = f->state == WB_FAILED ? 3 :
		       f->state == WB_UPLOADING ? 2 : 1;
		if (rank > worst_rank) {
			worst = f;
			worst_rank = rank;
		}
	}
	if (!worst)
		snprintf(buf, len, "synced");
	else if (worst->state == WB_FAILED)
		snprintf(buf, len, "failed: %s: %s", worst->rel, worst->reason);
	else
		snprintf(buf, len, "%s", state_word(worst->state));
	pthread_mutex_unlock(&a->lock);
}

/* ---- uploaders ---- */

/* Under a->lock: the next path to work on, or NULL (*@wait_ms until one). */
static struct wb_file *pick(struct wb_area *a, int64_t *wait_ms)
{
	int64_t now = dv_wb_now_ms();
	struct wb_file *f;

	*wait_ms = 1000;
	for (f = a->files; f; f = f->next) {
		if (!f->journalled || f->busy ||
		    (f->op == WB_OP_PUT && f->writers))
			continue;
		if (f->not_before <= now)
			return f;
		if (f->not_before - now < *wait_ms)
			*wait_ms = f->not_before - now;
	}
	return NULL;
}

static void mark_synced(struct wb_area *a, const char *rel, int fd,
			uint64_t size, int64_t mtime)
{
	char v[64];

	snprintf(v, sizeof(v), "%" PRIu64 ":%" PRId64, size, mtime);
	if (fsetxattr(fd, WB_SYNCED_XATTR, v, strlen(v), 0) < 0)
		dv_debug("write-back '%s': cannot mark %s synced: %s",
			 a->cfg->name, rel, strerror(errno));
}

/*
 * Runs a put of @rel: 0, 1 when the file is gone (its unlink queued what
 * the destination needs), -ESTALE when it is not what was closed, -errno.
 */
static int run_put(struct wb_area *a, const char *rel, uint64_t size,
		   int64_t mtime)
{
	int fd = openat(a->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	int ret;

	if (fd < 0)
		return errno == ENOENT ? 1 : -errno;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size ||
	    mtime_ns(&st) != mtime) {
		close(fd);
		return -ESTALE;
	}
	ret = a->dest_ops->put(a, rel, fd, size);
	if (ret == 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size == size &&
	    mtime_ns(&st) == mtime)
		mark_synced(a, rel, fd, size, mtime);
	close(fd);
	return ret;
}

/* Under a->lock: books the end of an operation on @f. */
static void finish(struct wb_area *a, struct wb_file *f, uint64_t gen,
		   enum wb_op op, int ret)
{
	int64_t wait;

	f->busy = false;
	if (f->gen != gen) {
		f->state = WB_PENDING; /* changed meanwhile: the newer runs */
		return;
	}
	if (ret == 1) { /* vanished: nothing to upload */
		f->journalled = false;
		f->state = WB_SYNCED;
		dv_wb_journal_drop(a, f->rel);
		maybe_drop(a, f);
		return;
	}
	if (ret == 0) {
		f->journalled = false;
		f->state = WB_SYNCED;
		f->remote = op == WB_OP_PUT;
		if (op == WB_OP_PUT) {
			a->st.uploaded_files++;
			a->st.uploaded_bytes += f->size;
		} else {
			a->st.deleted_files++;
		}
		dv_wb_journal_drop(a, f->rel);
		maybe_drop(a, f);
		return;
	}
	a->st.upload_errors++;
	f->attempts++;
	if (ret == -ESTALE) {
		f->state = WB_FAILED;
		snprintf(f->reason, sizeof(f->reason),
			 "changed after its last close and not closed again (the daemon stopped while it was open); not uploaded");
		f->not_before = INT64_MAX;
		return;
	}
	/* The network layer's spacing of background retries. */
	wait = dv_wb_transient(ret) ? dv_net_later_ms(f->attempts) : DV_NET_LATER_MAX_MS;
	f->not_before = dv_wb_now_ms() + wait;
	f->state = dv_wb_transient(ret) ? WB_PENDING : WB_FAILED;
	snprintf(f->reason, sizeof(f->reason), "%s %s: %s (attempt %u)",
		 op == WB_OP_PUT ? "upload of" : "delete of", f->rel,
		 strerror(-ret), f->attempts);
	dv_warn("write-back '%s': %s%s", a->cfg->name, f->reason,
		f->state == WB_FAILED ? "; failed" : "; will retry");
}

static void *worker(void *arg)
{
	struct wb_area *a = arg;
	char rel[PATH_MAX];
	struct wb_file *f;
	struct timespec ts;
	int64_t wait, mtime;
	uint64_t gen, size;
	enum wb_op op;
	int ret;

	pthread_mutex_lock(&a->lock);
	while (!a->stop) {
		f = pick(a, &wait);
		if (!f) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += wait / 1000;
			ts.tv_nsec += (wait % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&a->cond, &a->lock, &ts);
			continue;
		}
		f->busy = true;
		if (f->op == WB_OP_PUT) {
			f->state = WB_UPLOADING;
			f->remote = true;
		}
		snprintf(rel, sizeof(rel), "%s", f->rel);
		gen = f->gen;
		op = f->op;
		size = f->size;
		mtime = f->mtime_ns;
		pthread_mutex_unlock(&a->lock);
		ret = op == WB_OP_PUT ? run_put(a, rel, size, mtime) :
					a->dest_ops->del(a, rel);
		pthread_mutex_lock(&a->lock);
		finish(a, f, gen, op, ret);
		if (ret == 0 && op == WB_OP_PUT && a->cfg->max_bytes) {
			pthread_mutex_unlock(&a->lock);
			dv_wb_queue_evict(a, 0);
			pthread_mutex_lock(&a->lock);
		}
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* A journal entry read back at start-up. */
static void resume(struct wb_area *a, enum wb_op op, const char *rel,
		   uint64_t size, int64_t mtime)
{
	struct wb_file *f = get(a, rel, true);

	if (!f)
		return;
	f->op = op;
	f->size = size;
	f->mtime_ns = mtime;
	f->journalled = true;
	f->state = WB_PENDING;
	f->since = time(NULL);
	f->not_before = 0;
}

int dv_wb_queue_start(struct wb_area *a)
{
	pthread_condattr_t ca;
	int ret;

	pthread_mutex_init(&a->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	ret = dv_wb_journal_load(a, resume);
	if (ret)
		return ret;
	for (a->nworkers = 0; a->nworkers < WB_WORKERS; a->nworkers++) {
		ret = -pthread_create(&a->workers[a->nworkers], NULL, worker, a);
		if (ret)
			return ret;
	}
	return 0;
}

void dv_wb_queue_stop(struct wb_area *a)
{
	struct wb_file *f, *next;
	unsigned i;

	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	for (i = 0; i < a->nworkers; i++)
		pthread_join(a->workers[i], NULL);
	for (f = a->files; f; f = next) {
		next = f->next;
		free(f->rel);
		free(f);
	}
	a->files = NULL;
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
}
