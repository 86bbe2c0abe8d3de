/*
 * Modes and groups of what the cache creates (perms.h). The names of
 * temporary files come from getrandom(): mkostemp() would make them 0600
 * whatever the umask, which a shared cache cannot use.
 */
#include "perms.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define GROUP_BUF_MAX (1 << 20) /* getgrnam_r's buffer never grows past this */

int dv_parse_dir_mode(const char *s, mode_t *out)
{
	size_t n = strspn(s, "01234567");
	unsigned long v;

	if (n == 0 || n > 4 || s[n] != '\0')
		return -EINVAL;
	v = strtoul(s, NULL, 8);
	if (v > 0777 || (v & 0700) != 0700)
		return -EINVAL;
	*out = (mode_t)v;
	return 0;
}

int dv_parse_group(const char *s, gid_t *out)
{
	struct group gr, *res = NULL;
	size_t len = 1024;
	char *buf = NULL;
	int ret;

	if (s[0] == '\0')
		return -EINVAL;
	if (strspn(s, "0123456789") == strlen(s)) {
		unsigned long v = strtoul(s, NULL, 10);

		if (strlen(s) > 10 || v >= (gid_t)-1)
			return -EINVAL;
		*out = (gid_t)v;
		return 0;
	}
	for (;;) {
		char *b = realloc(buf, len);

		if (!b) {
			free(buf);
			return -ENOMEM;
		}
		buf = b;
		ret = getgrnam_r(s, &gr, buf, len, &res);
		if (ret != ERANGE || len >= GROUP_BUF_MAX)
			break;
		len *= 2;
	}
	if (ret == 0 && res)
		*out = res->gr_gid;
	free(buf);
	if (ret)
		return -ret;
	return res ? 0 : -ENOENT;
}

/* Gives the directory @path, just made, @perms' group, setgid and mode. */
static int own_dir(const char *path, const struct dv_perms *p)
{
	struct stat st;
	mode_t mode = p->mode;

	if (!p->mode && !p->has_group)
		return 0;
	/* chown first: it may clear the setgid bit that chmod then sets. */
	if (p->has_group && chown(path, (uid_t)-1, p->gid) < 0)
		return -errno;
	if (!mode) {
		if (stat(path, &st) < 0)
			return -errno;
		mode = st.st_mode & 0777; /* what the umask left */
	}
	if (p->has_group)
		mode |= S_ISGID;
	return chmod(path, mode) < 0 ? -errno : 0;
}

int dv_mkdir_perms(const char *path, const struct dv_perms *perms)
{
	if (mkdir(path, perms && perms->mode ? perms->mode : 0777) < 0)
		return errno == EEXIST ? 0 : -errno;
	return perms ? own_dir(path, perms) : 0;
}

int dv_mkdir_p_perms(const char *path, const struct dv_perms *perms)
{
	char buf[PATH_MAX];
	struct stat st;
	size_t len = strlen(path);
	int ret;

	if (len == 0 || len >= sizeof(buf))
		return len ? -ENAMETOOLONG : -EINVAL;
	memcpy(buf, path, len + 1);
	/* Each '/' after the first byte ends a prefix to create. */
	for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		ret = dv_mkdir_perms(buf, perms);
		*p = '/';
		if (ret)
			return ret;
	}
	ret = dv_mkdir_perms(buf, perms);
	if (ret)
		return ret;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int dv_mkstemp(char *tmpl, int flags)
{
	static const char chars[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t len = strlen(tmpl);
	char *x = tmpl + len - 6;

	if (len < 6 || strcmp(x, "XXXXXX") != 0)
		return -EINVAL;
	for (int tries = 0; tries < 100; tries++) {
		unsigned char r[6];
		int fd;

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -EIO;
		for (int i = 0; i < 6; i++)
			x[i] = chars[r[i] % (sizeof(chars) - 1)];
		fd = open(tmpl, O_RDWR | O_CREAT | O_EXCL | flags, 0666);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int dv_perms_apply_fd(int fd, const struct dv_perms *perms)
{
	struct stat st;
	mode_t want;

	if (!perms || (!perms->mode && !perms->has_group))
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (perms->has_group && st.st_gid != perms->gid &&
	    fchown(fd, (uid_t)-1, perms->gid) < 0)
		return -errno;
	want = perms->mode & 0666;
	if (perms->mode && (st.st_mode & 07777) != want && fchmod(fd, want) < 0)
		return -errno;
	return 0;
}
