/*
 * Small parsers shared by the config, the namespace and the CLI.
 *
 * Everything here is pure string work except dv_physical_memory() and the
 * $HOME / $VAR look-ups of dv_expand_path(). Nothing logs: callers know the
 * file, line and key, so they write the message.
 */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perms.h"

/* An expanded path never grows beyond what the kernel accepts. */
#define EXPAND_MAX PATH_MAX

struct size_suffix {
	const char *name;
	unsigned shift;
};

/* SI-style suffixes (B, KB, MB, GB, TB) are 1024-based, as they always were here. */
static const struct size_suffix size_suffixes[] = {
	{ "B", 0 },    { "KB", 10 },  { "MB", 20 },  { "GB", 30 },
	{ "TB", 40 },  { "PB", 50 },  { "KiB", 10 }, { "MiB", 20 },
	{ "GiB", 30 }, { "TiB", 40 }, { "PiB", 50 },
};

/* Reads the leading digits of @s; *@end points past them. */
static int parse_digits(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	bool overflow = false;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	*end = s;
	*out = v;
	/* Junk after an overflowing number is still junk, not a range error. */
	return overflow ? -ERANGE : 0;
}

static int suffix_shift(const char *s, unsigned *shift)
{
	size_t i;

	if (*s == '\0') {
		*shift = 0;
		return 0;
	}
	for (i = 0; i < sizeof(size_suffixes) / sizeof(size_suffixes[0]); i++) {
		if (strcasecmp(s, size_suffixes[i].name) == 0) {
			*shift = size_suffixes[i].shift;
			return 0;
		}
	}
	return -EINVAL;
}

int dv_parse_size(const char *s, uint64_t *out)
{
	const char *end;
	unsigned shift;
	uint64_t v;
	int digits_ret;

	if (!s)
		return -EINVAL;
	digits_ret = parse_digits(s, &end, &v);
	if (digits_ret == -EINVAL)
		return -EINVAL;
	if (*end == ' ' && end[1] != '\0')
		end++;
	if (suffix_shift(end, &shift) < 0)
		return -EINVAL;
	if (digits_ret < 0)
		return digits_ret;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int dv_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v;

	if (!s || parse_digits(s, &end, &v) < 0)
		return -EINVAL;
	if (*end != '\0' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A bounded string builder: every append fails once EXPAND_MAX is hit. */
struct pathbuf {
	char buf[EXPAND_MAX];
	size_t len;
};

static int pb_append(struct pathbuf *pb, const char *s, size_t n)
{
	if (n >= sizeof(pb->buf) - pb->len)
		return -ENAMETOOLONG;
	memcpy(pb->buf + pb->len, s, n);
	pb->len += n;
	pb->buf[pb->len] = '\0';
	return 0;
}

static const char *home_dir(void)
{
	const char *home = getenv("HOME");
	struct passwd *pw;

	if (home && *home)
		return home;
	pw = getpwuid(getuid());
	if (pw && pw->pw_dir && *pw->pw_dir)
		return pw->pw_dir;
	return NULL;
}

static bool is_name_start(char c)
{
	return c == '_' || isalpha((unsigned char)c);
}

static bool is_name_char(char c)
{
	return c == '_' || isalnum((unsigned char)c);
}

/*
 * Expands the variable at @s (which points at '$'). *@used is how many
 * input bytes it consumed. A '$' not followed by a name is kept as is.
 */
static int expand_var(struct pathbuf *pb, const char *s, size_t *used)
{
	bool braced = s[1] == '{';
	const char *name = s + 1 + braced;
	char var[256];
	const char *value;
	size_t n = 0;

	if (!is_name_start(*name)) {
		if (braced)
			return -EINVAL;
		*used = 1;
		return pb_append(pb, "$", 1);
	}
	while (is_name_char(name[n]))
		n++;
	if (braced && name[n] != '}')
		return -EINVAL;
	if (n >= sizeof(var))
		return -ENAMETOOLONG;
	memcpy(var, name, n);
	var[n] = '\0';
	value = getenv(var);
	if (!value)
		return -ENOENT;
	*used = 1 + braced + n + braced;
	return pb_append(pb, value, strlen(value));
}

int dv_expand_path(const char *in, char **out)
{
	struct pathbuf *pb;
	const char *home;
	size_t used;
	int ret = 0;

	if (!in)
		return -EINVAL;
	pb = calloc(1, sizeof(*pb));
	if (!pb)
		return -ENOMEM;
	if (in[0] == '~' && (in[1] == '\0' || in[1] == '/')) {
		home = home_dir();
		ret = home ? pb_append(pb, home, strlen(home)) : -ENOENT;
		in++;
	}
	while (ret == 0 && *in) {
		used = 1;
		if (*in == '$')
			ret = expand_var(pb, in, &used);
		else
			ret = pb_append(pb, in, 1);
		in += used;
	}
	if (ret == 0) {
		*out = strdup(pb->buf);
		if (!*out)
			ret = -ENOMEM;
	}
	free(pb);
	return ret;
}

bool dv_valid_hash(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++) {
		if (!isdigit((unsigned char)s[n]) && (s[n] < 'a' || s[n] > 'f'))
			return false;
		if (n >= 64)
			return false;
	}
	return n >= 32;
}

bool dv_valid_name_part(const char *s)
{
	const char *p;

	if (!s || !*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (p = s; *p; p++) {
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' &&
		    *p != '-')
			return false;
	}
	return true;
}

char *dv_format_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B",   "KiB", "MiB", "GiB",
					     "TiB", "PiB", "EiB" };
	const size_t last = sizeof(units) / sizeof(units[0]) - 1;
	double v = (double)bytes;
	char num[32];
	char *dot;
	size_t i = 0;

	if (!buf || len == 0)
		return buf;
	if (bytes < 1024) {
		snprintf(buf, len, "%u B", (unsigned)bytes);
		return buf;
	}
	while (v >= 1024 && i < last) {
		v /= 1024;
		i++;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": say "1 MiB" instead. */
	if (v >= 1023.95 && i < last) {
		v /= 1024;
		i++;
	}
	snprintf(num, sizeof(num), "%.1f", v);
	dot = strstr(num, ".0");
	if (dot && dot[2] == '\0')
		*dot = '\0';
	snprintf(buf, len, "%s %s", num, units[i]);
	return buf;
}

int dv_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };
	size_t i;

	for (i = 0; s && i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

bool dv_valid_addr_port(const char *s)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	uint64_t port;

	if (!colon || colon == s || strpbrk(s, " \t\r\n"))
		return false;
	if (dv_parse_uint(colon + 1, 65535, &port) < 0 || port == 0)
		return false;
	if (s[0] == '[' || strchr(s, ':') != colon)
		return s[0] == '[' && colon[-1] == ']' && colon - s > 2;
	return true;
}

/* Reads at most @size bytes of @fd into a new NUL-terminated buffer. */
static int read_all(int fd, size_t size, char **out, size_t *len)
{
	char *buf = malloc(size + 1);
	size_t got = 0;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	while (got < size) {
		n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			free(buf);
			return (int)n;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int dv_read_file(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	int ret;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		ret = -errno;
	else if (S_ISDIR(st.st_mode))
		ret = -EISDIR;
	else if (!S_ISREG(st.st_mode))
		ret = -EINVAL;
	else if ((uint64_t)st.st_size > max)
		ret = -EFBIG;
	else
		ret = read_all(fd, (size_t)st.st_size, out, len);
	close(fd);
	return ret;
}

int dv_read_token_file(const char *path, size_t max, char **out)
{
	size_t len;
	int ret = dv_read_file(path, max, out, &len);

	if (ret)
		return ret;
	while (len > 0 && isspace((unsigned char)(*out)[len - 1]))
		(*out)[--len] = '\0';
	return 0;
}

void *dv_grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	size_t want = *cap ? *cap * 2 : first;
	void *grown;

	if (n < *cap)
		return v;
	if (want < *cap)
		return NULL;
	grown = reallocarray(v, want, size);
	if (grown)
		*cap = want;
	return grown;
}

uint64_t dv_physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page_size = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || page_size <= 0)
		return 0;
	return (uint64_t)pages * (uint64_t)page_size;
}

int dv_mkdir_p(const char *path, mode_t mode)
{
	const struct dv_perms perms = { .mode = mode };

	return dv_mkdir_p_perms(path, &perms);
}

/* One loop for short transfers and EINTR, whichever way the bytes go. */
static int pio_full(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	size_t done = 0;

	while (done < len) {
		char *p = (char *)buf + done;
		ssize_t n = write ? pwrite(fd, p, len - done, (off_t)(off + done)) :
				    pread(fd, p, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int dv_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, buf, len, off, false);
}

int dv_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return pio_full(fd, (void *)buf, len, off, true);
}
