/*
 * The namespace's documents (ns_impl.h): datasets.json, manifests and
 * pinned revisions, read from the origin or from the on-disk cache.
 *
 * STATE/origin/<relpath> mirrors each accepted document with a one-line
 * header "datavo-cache/1 <etag>\n"; its mtime is the document's fetch time,
 * which is what stat shows. The callers decide what is accepted: bad
 * documents are never cached. A damaged cache file is ignored (and logged),
 * never trusted. Not here: parsing documents, deciding what to keep.
 */
#include "ns_impl.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/log.h"
#include "config/perms.h"
#include "config/util.h"
#include "tiers/origin/origin.h"
#include "manifest.h"

#define CACHE_MAGIC "datavo-cache/1 "
#define MAX_ETAG 512
#define CACHE_HEAD_MAX (sizeof(CACHE_MAGIC) + MAX_ETAG + 1)

void dv_ns_doc_release(struct doc *d)
{
	free(d->body);
	free(d->etag);
	memset(d, 0, sizeof(*d));
}

static int cache_path(const struct dv_namespace *ns, const char *relpath,
		      char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/origin/%s", ns->state_dir, relpath);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int dv_ns_cache_file_read(const char *path, char **body, size_t *len,
			  char **etag, time_t *mtime)
{
	size_t hlen = strlen(CACHE_MAGIC);
	char *text = NULL, *nl;
	int ret = dv_doc_read(path, DV_DOC_MAX + MAX_ETAG, &text, len, mtime);

	if (ret)
		return ret;
	nl = memchr(text, '\n', *len < CACHE_HEAD_MAX ? *len : CACHE_HEAD_MAX);
	if (!nl || strncmp(text, CACHE_MAGIC, hlen) != 0) {
		free(text);
		return -EBADMSG;
	}
	*nl = '\0';
	if (etag) {
		*etag = nl > text + hlen ? strdup(text + hlen) : NULL;
		if (nl > text + hlen && !*etag) {
			free(text);
			return -ENOMEM;
		}
	}
	*len -= (size_t)(nl + 1 - text);
	memmove(text, nl + 1, *len + 1);
	*body = text;
	return 0;
}

/* The cached copy of @relpath: 0, -ENOENT, -EBADMSG (damaged). */
static int cache_read(const struct dv_namespace *ns, const char *relpath,
		      struct doc *d)
{
	char path[PATH_MAX];
	int ret;

	if (!ns->state_dir)
		return -ENOENT;
	ret = cache_path(ns, relpath, path, sizeof(path));
	if (ret == 0)
		ret = dv_ns_cache_file_read(path, &d->body, &d->len, &d->etag,
					    &d->mtime);
	if (ret == -EBADMSG)
		dv_warn("namespace: ignoring damaged cache file %s", path);
	return ret;
}

void dv_ns_cache_write(const struct dv_namespace *ns, const char *relpath,
		       const struct doc *d)
{
	char path[PATH_MAX], head[CACHE_HEAD_MAX + 1], *slash;
	struct iovec iov[2];
	int ret, n;

	if (!ns->state_dir)
		return;
	n = snprintf(head, sizeof(head), "%s%s\n", CACHE_MAGIC,
		     d->etag && strlen(d->etag) < MAX_ETAG &&
				     !strchr(d->etag, '\n') ? d->etag : "");
	ret = cache_path(ns, relpath, path, sizeof(path));
	if (ret == 0) {
		slash = strrchr(path, '/');
		*slash = '\0';
		ret = dv_mkdir_p_perms(path, NULL);
		*slash = '/';
	}
	iov[0] = (struct iovec){ head, (size_t)n };
	iov[1] = (struct iovec){ d->body, d->len };
	if (ret == 0)
		ret = dv_doc_write_atomic(path, iov, 2, 0, d->mtime);
	if (ret)
		dv_warn("namespace: cannot cache %s: %s", path, strerror(-ret));
}

int dv_ns_doc_get(struct dv_namespace *ns, bool cached, const char *relpath,
		  const char *etag, struct doc *d)
{
	int ret;

	memset(d, 0, sizeof(*d));
	if (cached)
		return cache_read(ns, relpath, d);
	ret = dv_origin_get_doc(ns->origin, relpath, etag, &d->body, &d->len,
				&d->etag);
	d->mtime = time(NULL);
	return ret;
}

/* ---- every cached manifest, for datavoctl verify ---- */

#define MAX_DEPTH 16

struct walk {
	dv_ns_manifest_fn fn;
	void *arg;
};

static bool is_manifest_name(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);

	if (strcmp(name, "manifest.json") == 0)
		return true;
	/* revisions/<N>.json */
	return dl >= 10 && strcmp(dir + dl - 10, "/revisions") == 0 && nl > 5 &&
	       strcmp(name + nl - 5, ".json") == 0;
}

static int visit_manifest(struct walk *w, const char *path)
{
	struct dv_manifest *m = NULL;
	char *body = NULL, err[512];
	size_t len;
	int ret = dv_ns_cache_file_read(path, &body, &len, NULL, NULL);

	if (ret == -ENOMEM)
		return ret;
	if (ret == -EBADMSG)
		snprintf(err, sizeof(err), "not a datavo cache file (damaged?)");
	else if (ret)
		return 0; /* gone meanwhile, or unreadable: not a manifest */
	if (ret == 0 && dv_manifest_parse(body, len, NULL, &m, err, sizeof(err)))
		m = NULL;
	ret = w->fn(w->arg, path, m, m ? NULL : err);
	dv_manifest_free(m);
	free(body);
	return ret;
}

static int walk_dir(struct walk *w, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while (ret == 0 && (de = readdir(d)) != NULL) {
		char *p;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) {
			ret = -ENOMEM;
			break;
		}
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < MAX_DEPTH)
			ret = walk_dir(w, p, depth + 1);
		else if (S_ISREG(st.st_mode) && is_manifest_name(dir, de->d_name))
			ret = visit_manifest(w, p);
		free(p);
	}
	closedir(d);
	return ret;
}

int dv_ns_cached_manifests(const char *base, dv_ns_manifest_fn fn, void *arg)
{
	struct walk w = { fn, arg };

	return walk_dir(&w, base, 0);
}
