/*
 * Write-back areas: opening their landing folders and destinations, the
 * inode table of the entries the kernel knows, and their counters.
 *
 * Inodes: an entry's number is the landing file's own st_ino with the
 * area's index and DV_NS_FOREIGN_INO above it (writeback.h), so a rename
 * keeps it, as on a local filesystem. The table maps each number the
 * kernel holds to the entry's current path; renames rewrite the paths
 * below them. Forget drops an entry at zero references, but never an
 * area's root.
 */
#include "wb_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/log.h"

static size_t bucket_of(uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 40) % WB_NODE_BUCKETS;
}

/* Under nodes_lock. */
static struct wb_node *node_find(struct dv_wb *wb, uint64_t ino)
{
	struct wb_node *n;

	for (n = wb->buckets[bucket_of(ino)]; n; n = n->next) {
		if (n->ino == ino)
			return n;
	}
	return NULL;
}

int dv_wb_node_add(struct dv_wb *wb, struct wb_area *a, const char *rel,
		   struct stat *st, uint64_t nlookup)
{
	uint64_t ino = dv_wb_make_ino(a, st->st_ino);
	struct wb_node *n;
	char *copy = NULL;
	int ret = 0;

	st->st_ino = ino;
	pthread_mutex_lock(&wb->nodes_lock);
	n = node_find(wb, ino);
	if (n && strcmp(n->rel, rel) != 0) {
		copy = strdup(rel); /* the same inode under a new name */
		if (copy) {
			free(n->rel);
			n->rel = copy;
		} else {
			ret = -ENOMEM;
		}
	} else if (!n) {
		n = calloc(1, sizeof(*n));
		if (n)
			n->rel = strdup(rel);
		if (!n || !n->rel) {
			free(n);
			n = NULL;
			ret = -ENOMEM;
		} else {
			n->ino = ino;
			n->area = a;
			n->next = wb->buckets[bucket_of(ino)];
			wb->buckets[bucket_of(ino)] = n;
		}
	}
	if (n && ret == 0)
		n->nlookup += nlookup;
	pthread_mutex_unlock(&wb->nodes_lock);
	return ret;
}

int dv_wb_node_path(struct dv_wb *wb, uint64_t ino, struct wb_area **a,
		    char *rel, size_t len)
{
	struct wb_node *n;
	int ret = 0;

	pthread_mutex_lock(&wb->nodes_lock);
	n = node_find(wb, ino);
	if (!n)
		ret = -ENOENT;
	else if (snprintf(rel, len, "%s", n->rel) >= (int)len)
		ret = -ENAMETOOLONG;
	else
		*a = n->area;
	pthread_mutex_unlock(&wb->nodes_lock);
	return ret;
}

void dv_wb_node_forget(struct dv_wb *wb, uint64_t ino, uint64_t count)
{
	struct wb_node **p, *n;

	pthread_mutex_lock(&wb->nodes_lock);
	for (p = &wb->buckets[bucket_of(ino)]; *p; p = &(*p)->next) {
		n = *p;
		if (n->ino != ino)
			continue;
		n->nlookup = n->nlookup > count ? n->nlookup - count : 0;
		if (n->nlookup == 0 && !n->pinned) {
			*p = n->next;
			free(n->rel);
			free(n);
		}
		break;
	}
	pthread_mutex_unlock(&wb->nodes_lock);
}

static bool under(const char *rel, const char *dir, size_t n)
{
	return strncmp(rel, dir, n) == 0 && (rel[n] == '\0' || rel[n] == '/');
}

void dv_wb_node_rename(struct dv_wb *wb, struct wb_area *a, const char *from,
		       const char *to)
{
	size_t i, n = strlen(from);
	struct wb_node *node;
	char *p;

	pthread_mutex_lock(&wb->nodes_lock);
	for (i = 0; i < WB_NODE_BUCKETS; i++) {
		for (node = wb->buckets[i]; node; node = node->next) {
			if (node->area != a || !under(node->rel, from, n))
				continue;
			if (asprintf(&p, "%s%s", to, node->rel + n) < 0)
				continue; /* keeps the old path: ENOENT later */
			free(node->rel);
			node->rel = p;
		}
	}
	pthread_mutex_unlock(&wb->nodes_lock);
}

int dv_wb_join(char *out, size_t len, const char *dir, const char *name)
{
	int n = *dir ? snprintf(out, len, "%s/%s", dir, name) :
		       snprintf(out, len, "%s", name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

struct wb_area *dv_wb_area_named(struct dv_wb *wb, const char *name)
{
	size_t i;

	for (i = 0; wb && i < wb->n; i++) {
		if (strcmp(wb->areas[i].cfg->name, name) == 0)
			return &wb->areas[i];
	}
	return NULL;
}

size_t dv_wb_count(const struct dv_wb *wb)
{
	return wb ? wb->n : 0;
}

const char *dv_wb_name(const struct dv_wb *wb, size_t i)
{
	return wb->areas[i].cfg->name;
}

uint64_t dv_wb_root_ino(const struct dv_wb *wb, size_t i)
{
	return wb->areas[i].root_ino;
}

void dv_wb_root_stat(struct dv_wb *wb, size_t i, struct stat *st)
{
	struct wb_area *a = &wb->areas[i];

	if (fstat(a->dirfd, st) == 0)
		st->st_ino = a->root_ino;
}

/* ---- set-up ---- */

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int open_area(struct dv_wb *wb, struct wb_area *a,
		     const struct dv_config *cfg, char *err, size_t errlen)
{
	const struct dv_writeback_config *c = a->cfg;
	struct stat st;
	int ret = mkdir_p(c->path);

	a->dirfd = a->jfd = -1;
	if (ret == 0) {
		a->dirfd = open(c->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ret = a->dirfd < 0 ? -errno : 0;
	}
	if (ret == 0)
		ret = fstat(a->dirfd, &st) < 0 ? -errno : 0;
	if (ret == 0)
		ret = dv_wb_journal_open(a);
	if (ret) {
		snprintf(err, errlen, "write-back '%s': landing folder %s: %s",
			 c->name, c->path, strerror(-ret));
		return ret;
	}
	ret = dv_wb_node_add(wb, a, "", &st, 1);
	if (ret)
		return ret;
	a->root_ino = st.st_ino;
	wb->buckets[bucket_of(a->root_ino)]->pinned = true;
	ret = dv_wb_dest_open(a, cfg, err, errlen);
	if (ret)
		return ret;
	ret = dv_wb_queue_start(a);
	if (ret)
		snprintf(err, errlen, "write-back '%s': cannot start: %s",
			 c->name, strerror(-ret));
	return ret;
}

static int check_datasets(const struct dv_config *cfg,
			  struct dv_namespace *ns, char *err, size_t errlen)
{
	struct dv_ns_entry e;
	size_t i;

	for (i = 0; ns && i < cfg->nwritebacks; i++) {
		const struct dv_writeback_config *c = &cfg->writebacks[i];

		if (dv_ns_lookup(ns, DV_NS_ROOT_INO, c->name, &e) == 0) {
			snprintf(err, errlen,
				 "%s:%d: key 'writeback.name': '%s' is also a dataset of the origin (pick another name)",
				 cfg->path ? cfg->path : "<config>", c->line,
				 c->name);
			return -EEXIST;
		}
	}
	return 0;
}

int dv_wb_new(const struct dv_config *cfg, struct dv_namespace *ns,
	      struct dv_wb **out, char *err, size_t errlen)
{
	struct dv_wb *wb;
	size_t i;
	int ret;

	*out = NULL;
	if (cfg->nwritebacks == 0)
		return 0;
	if (cfg->nwritebacks > WB_MAX_AREAS) {
		snprintf(err, errlen, "at most %d write-back areas", WB_MAX_AREAS);
		return -EINVAL;
	}
	ret = check_datasets(cfg, ns, err, errlen);
	if (ret)
		return ret;
	wb = calloc(1, sizeof(*wb));
	if (wb)
		wb->areas = calloc(cfg->nwritebacks, sizeof(*wb->areas));
	if (!wb || !wb->areas) {
		free(wb);
		snprintf(err, errlen, "write-back: out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&wb->nodes_lock, NULL);
	for (i = 0; i < cfg->nwritebacks; i++) {
		wb->areas[i].wb = wb;
		wb->areas[i].index = (unsigned)i;
		wb->areas[i].cfg = &cfg->writebacks[i];
		ret = open_area(wb, &wb->areas[i], cfg, err, errlen);
		wb->n = i + 1;
		if (ret) {
			dv_wb_free(wb);
			return ret;
		}
		dv_info("write-back '%s': %s → %s", cfg->writebacks[i].name,
			cfg->writebacks[i].path, cfg->writebacks[i].destination);
	}
	*out = wb;
	return 0;
}

void dv_wb_free(struct dv_wb *wb)
{
	struct wb_node *n, *next;
	size_t i;

	if (!wb)
		return;
	for (i = 0; i < wb->n; i++) {
		struct wb_area *a = &wb->areas[i];

		if (a->nworkers || a->files)
			dv_wb_queue_stop(a);
		if (a->dest_ops)
			a->dest_ops->free(a);
		if (a->jfd >= 0)
			close(a->jfd);
		if (a->dirfd >= 0)
			close(a->dirfd);
	}
	for (i = 0; i < WB_NODE_BUCKETS; i++) {
		for (n = wb->buckets[i]; n; n = next) {
			next = n->next;
			free(n->rel);
			free(n);
		}
	}
	pthread_mutex_destroy(&wb->nodes_lock);
	free(wb->areas);
	free(wb);
}

/* ---- counters ---- */

void dv_wb_stats(struct dv_wb *wb, size_t i, struct dv_wb_stats *out)
{
	struct wb_area *a = &wb->areas[i];
	time_t now = time(NULL), oldest = now;
	struct wb_file *f;

	pthread_mutex_lock(&a->lock);
	*out = a->st;
	out->pending_files = out->pending_bytes = out->failed_files = 0;
	for (f = a->files; f; f = f->next) {
		if (!f->journalled)
			continue;
		if (f->state == WB_FAILED)
			out->failed_files++;
		out->pending_files++;
		out->pending_bytes += f->op == WB_OP_PUT ? f->size : 0;
		if (f->since < oldest)
			oldest = f->since;
	}
	pthread_mutex_unlock(&a->lock);
	out->oldest_pending = (uint64_t)(now - oldest);
}

void dv_wb_status_json(struct dv_wb *wb, struct dv_text *o)
{
	struct dv_wb_stats s;
	size_t i;

	dv_text_printf(o, ",\n  \"writeback\": [");
	for (i = 0; i < dv_wb_count(wb); i++) {
		dv_wb_stats(wb, i, &s);
		dv_text_printf(o, "%s\n    {\"name\": ", i ? "," : "");
		dv_text_json_str(o, wb->areas[i].cfg->name);
		dv_text_printf(o, ", \"destination\": ");
		dv_text_json_str(o, wb->areas[i].cfg->destination);
		dv_text_printf(o, ", \"path\": ");
		dv_text_json_str(o, wb->areas[i].cfg->path);
		dv_text_printf(o,
			       ", \"pending_files\": %" PRIu64
			       ", \"pending_bytes\": %" PRIu64
			       ", \"oldest_pending_seconds\": %" PRIu64
			       ", \"failed_files\": %" PRIu64
			       ", \"uploaded_files\": %" PRIu64
			       ", \"uploaded_bytes\": %" PRIu64
			       ", \"deleted_files\": %" PRIu64
			       ", \"upload_errors\": %" PRIu64
			       ", \"evicted_files\": %" PRIu64 "}",
			       s.pending_files, s.pending_bytes,
			       s.oldest_pending, s.failed_files,
			       s.uploaded_files, s.uploaded_bytes,
			       s.deleted_files, s.upload_errors,
			       s.evicted_files);
	}
	dv_text_printf(o, "%s]", dv_wb_count(wb) ? "\n  " : "");
}
