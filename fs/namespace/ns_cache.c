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

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The cached copy of @relpath: 0, -ENOENT, -EBADMSG (damaged). */
static int cache_read(const struct dv_namespace *ns, const char *relpath,
		      struct doc *d)
{
	char path[PATH_MAX], *nl;
	size_t hlen = strlen(CACHE_MAGIC);
	int ret;

	if (!ns->state_dir)
		return -ENOENT;
	ret = cache_path(ns, relpath, path, sizeof(path));
	if (ret == 0)
		ret = dv_doc_read(path, DV_DOC_MAX + MAX_ETAG, &d->body, &d->len,
				  &d->mtime);
	if (ret)
		return ret;
	nl = memchr(d->body, '\n',
		    d->len < CACHE_HEAD_MAX ? d->len : CACHE_HEAD_MAX);
	if (!nl || strncmp(d->body, CACHE_MAGIC, hlen) != 0) {
		dv_warn("namespace: ignoring damaged cache file %s", path);
		dv_ns_doc_release(d);
		return -EBADMSG;
	}
	*nl = '\0';
	if (nl > d->body + hlen) {
		d->etag = strdup(d->body + hlen);
		if (!d->etag) {
			dv_ns_doc_release(d);
			return -ENOMEM;
		}
	}
	d->len -= (size_t)(nl + 1 - d->body);
	memmove(d->body, nl + 1, d->len + 1);
	return 0;
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
