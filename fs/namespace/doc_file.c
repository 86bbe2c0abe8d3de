/*
 * Origin documents on disk (manifest.h): the atomic writer shared by the
 * publisher and the namespace's cache, and the bounded reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "manifest.h"
#include "config/perms.h"
#include "config/util.h"

static int write_all(int fd, const struct iovec *iov, int iovcnt)
{
	for (int i = 0; i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			ssize_t n = write(fd, p, left);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			p += n;
			left -= (size_t)n;
		}
	}
	return 0;
}

static int fsync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	int n = !slash ? 1 : slash == path ? 1 : (int)(slash - path);
	char dir[PATH_MAX];
	int fd, ret = 0;

	if (n >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%.*s", n, slash ? path : ".");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* "dir/.name.tmp.XXXXXX" next to @path: hidden from listings. */
static int temp_name(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path + 1) : 0;
	int n = snprintf(buf, len, "%.*s.%s.tmp.XXXXXX", dirlen, path,
			 path + dirlen);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int dv_doc_write_atomic(const char *path, const struct iovec *iov, int iovcnt,
			mode_t mode, time_t mtime)
{
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	char tmp[PATH_MAX];
	int fd, ret;

	ret = temp_name(path, tmp, sizeof(tmp));
	if (ret)
		return ret;
	/* mode 0: the umask decides, as for any file the user makes. */
	fd = mode ? mkostemp(tmp, O_CLOEXEC) : dv_mkstemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return mode ? -errno : fd;
	ret = write_all(fd, iov, iovcnt);
	if (ret == 0 && mode && fchmod(fd, mode) < 0)
		ret = -errno;
	if (ret == 0 && mtime && futimens(fd, ts) < 0)
		ret = -errno;
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, path) < 0)
		ret = -errno;
	if (ret) {
		unlink(tmp);
		return ret;
	}
	return fsync_parent(path);
}

/* mkdir, then chmod: a directory gets @mode whatever the umask. */
int dv_doc_read(const char *path, size_t max, char **out, size_t *len,
		time_t *mtime)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		ret = -errno;
	else if (!S_ISREG(st.st_mode))
		ret = -EINVAL;
	else if ((uint64_t)st.st_size > max)
		ret = -EFBIG;
	if (ret == 0) {
		buf = malloc((size_t)st.st_size + 1);
		ret = buf ? 0 : -ENOMEM;
	}
	while (ret == 0 && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ret = n < 0 ? -errno : -EIO;
		else
			got += (size_t)n;
	}
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	if (mtime)
		*mtime = st.st_mtime;
	return 0;
}
