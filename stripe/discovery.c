/*
 * Device discovery and safety checks (discovery.h).
 *
 * The picture of the machine comes from /proc/self/mountinfo (mounted
 * devices and the root filesystem), /proc/swaps and sysfs
 * (/sys/class/block/<name>: partition, slaves/, holders/, ro, size,
 * hidden; /sys/dev/block/<maj:min> to name a device number). Every check
 * that can refuse a device runs before it is opened; the only open is
 * read-only, with O_EXCL on block devices, which the kernel refuses for a
 * device that is mounted or claimed even in another mount namespace.
 */
#include "discovery.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "layout.h"

#define SYS_BLOCK "/sys/class/block"
#define MAX_NAMES 4096

/* A set of kernel device names. */
struct names {
	char **v;
	size_t n;
};

struct mount_ref {
	dev_t dev;
	char point[256]; /* a mount point, or "swap" */
};

/* What the machine looks like, gathered once per discovery. */
struct machine {
	struct mount_ref *mounts;
	size_t nmounts;
	struct names root;   /* the root device and everything tied to it */
	char root_dev[64];   /* its name, for messages */
};

/* ---- small helpers ---- */

/* snprintf for messages and names, where truncation is acceptable. */
static void fmt(char *dst, size_t len, const char *f, ...)
	__attribute__((format(printf, 3, 4)));

static void fmt(char *dst, size_t len, const char *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vsnprintf(dst, len, f, ap);
	va_end(ap);
}

static bool names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->v[i], name) == 0)
			return true;
	}
	return false;
}

static void names_add(struct names *s, const char *name)
{
	char **v;

	if (names_has(s, name) || s->n >= MAX_NAMES)
		return;
	v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (!v)
		return;
	s->v = v;
	s->v[s->n] = strdup(name);
	if (s->v[s->n])
		s->n++;
}

static void names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* Reads the first line of a sysfs attribute. 0 or -errno. */
static int sys_read(const char *name, const char *attr, char *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;
	bool ok;

	fmt(path, sizeof(path), SYS_BLOCK "/%s/%s", name, attr);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -EIO;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static bool sys_flag(const char *name, const char *attr)
{
	char buf[16];

	return sys_read(name, attr, buf, sizeof(buf)) == 0 && atoi(buf) != 0;
}

static bool sys_exists(const char *name, const char *attr)
{
	char path[PATH_MAX];

	fmt(path, sizeof(path), SYS_BLOCK "/%s/%s", name, attr);
	return access(path, F_OK) == 0;
}

/* Entries of a sysfs directory of @name (slaves, holders, or the device). */
static void sys_list(const char *name, const char *sub, struct names *out)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	fmt(path, sizeof(path), SYS_BLOCK "/%s%s%s", name, *sub ? "/" : "",
		 sub);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.')
			names_add(out, de->d_name);
	}
	closedir(d);
}

/* The partitions of disk @name. */
static void sys_partitions(const char *name, struct names *out)
{
	struct names all = { 0 };

	sys_list(name, "", &all);
	for (size_t i = 0; i < all.n; i++) {
		char attr[PATH_MAX];

		fmt(attr, sizeof(attr), "%s/partition", all.v[i]);
		if (sys_exists(name, attr))
			names_add(out, all.v[i]);
	}
	names_free(&all);
}

/* The disk a partition belongs to. 0 or -ENOENT. */
static int sys_parent(const char *name, char *out, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX];
	char *slash;

	fmt(path, sizeof(path), SYS_BLOCK "/%s", name);
	if (!realpath(path, real))
		return -errno;
	slash = strrchr(real, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	slash = strrchr(real, '/');
	if (!slash)
		return -ENOENT;
	fmt(out, len, "%s", slash + 1);
	return 0;
}

/* The kernel name of device number @dev. 0 or -errno. */
static int name_of_dev(dev_t dev, char *out, size_t len)
{
	char path[64], real[PATH_MAX];
	const char *slash;

	fmt(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	if (!realpath(path, real))
		return -errno;
	slash = strrchr(real, '/');
	fmt(out, len, "%s", slash ? slash + 1 : real);
	return 0;
}

static dev_t dev_of_name(const char *name)
{
	unsigned ma, mi;
	char buf[32];

	if (sys_read(name, "dev", buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &ma, &mi) != 2)
		return 0;
	return makedev(ma, mi);
}

/* ---- the machine: mounts, swap, the root device ---- */

static void add_mount(struct machine *m, dev_t dev, const char *point)
{
	struct mount_ref *v;

	if (!dev)
		return;
	v = realloc(m->mounts, (m->nmounts + 1) * sizeof(*v));
	if (!v)
		return;
	m->mounts = v;
	v[m->nmounts].dev = dev;
	fmt(v[m->nmounts].point, sizeof(v[m->nmounts].point), "%s", point);
	m->nmounts++;
}

static dev_t block_dev_of_path(const char *path)
{
	struct stat st;

	if (strncmp(path, "/dev/", 5) != 0 || stat(path, &st) ||
	    !S_ISBLK(st.st_mode))
		return 0;
	return st.st_rdev;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] && r[3]) {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
				      (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* One mountinfo line: its device(s) and mount point. */
static void parse_mountinfo_line(struct machine *m, char *line, dev_t *root)
{
	char *save = NULL, *f[6] = { 0 };
	char *source = NULL, *sep;
	unsigned ma, mi;
	dev_t dev, src;
	int k = 0;

	sep = strstr(line, " - ");
	if (sep) {
		char *save2 = NULL;

		*sep = '\0';
		strtok_r(sep + 3, " \n", &save2);     /* fstype */
		source = strtok_r(NULL, " \n", &save2);
	}
	for (char *t = strtok_r(line, " ", &save); t && k < 6;
	     t = strtok_r(NULL, " ", &save))
		f[k++] = t;
	if (k < 5 || sscanf(f[2], "%u:%u", &ma, &mi) != 2)
		return;
	unescape(f[4]);
	dev = ma ? makedev(ma, mi) : 0;
	src = source ? block_dev_of_path(source) : 0;
	add_mount(m, dev, f[4]);
	if (src && src != dev)
		add_mount(m, src, f[4]);
	if (strcmp(f[4], "/") == 0)
		*root = dev ? dev : src;
}

static void read_mounts(struct machine *m, dev_t *root)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];

	if (f) {
		while (fgets(line, sizeof(line), f))
			parse_mountinfo_line(m, line, root);
		fclose(f);
	}
	f = fopen("/proc/swaps", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char path[PATH_MAX];

		if (sscanf(line, "%4095s", path) == 1)
			add_mount(m, block_dev_of_path(path), "swap");
	}
	fclose(f);
}

/*
 * The root device and everything tied to it: parents, slaves, holders,
 * and the other partitions of its disks.
 */
static void collect_root(struct machine *m, dev_t root)
{
	if (!root || name_of_dev(root, m->root_dev, sizeof(m->root_dev)))
		return;
	names_add(&m->root, m->root_dev);
	for (size_t i = 0; i < m->root.n; i++) {
		char name[64], parent[64];

		fmt(name, sizeof(name), "%s", m->root.v[i]);
		if (sys_exists(name, "partition")) {
			if (sys_parent(name, parent, sizeof(parent)) == 0)
				names_add(&m->root, parent);
		} else {
			sys_partitions(name, &m->root);
		}
		sys_list(name, "slaves", &m->root);
		sys_list(name, "holders", &m->root);
	}
}

static void machine_load(struct machine *m)
{
	dev_t root = 0;

	memset(m, 0, sizeof(*m));
	read_mounts(m, &root);
	collect_root(m, root);
}

static void machine_free(struct machine *m)
{
	free(m->mounts);
	names_free(&m->root);
}

static const char *mounted_at(const struct machine *m, dev_t dev)
{
	for (size_t i = 0; i < m->nmounts; i++) {
		if (m->mounts[i].dev == dev)
			return m->mounts[i].point;
	}
	return NULL;
}

/* ---- signatures ---- */

static bool at(const uint8_t *buf, size_t len, size_t off, const char *magic,
	       size_t mlen)
{
	return off + mlen <= len && memcmp(buf + off, magic, mlen) == 0;
}

static bool zfs_label(const uint8_t *buf, size_t len)
{
	/* Label 0's uberblock ring: 128 KiB..256 KiB, 1 KiB apart. */
	for (size_t off = 128u << 10; off + 8 <= len && off < (256u << 10);
	     off += 1024) {
		uint64_t v = dv_get_le64(buf + off);

		if (v == 0x00bab10cULL || v == 0x0cb1ba0000000000ULL)
			return true;
	}
	return false;
}

static bool swap_sig(const uint8_t *buf, size_t len)
{
	static const size_t pages[] = { 4096, 8192, 16384, 65536 };

	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		if (at(buf, len, pages[i] - 10, "SWAPSPACE2", 10) ||
		    at(buf, len, pages[i] - 10, "SWAP-SPACE", 10))
			return true;
	}
	return false;
}

static bool lvm_sig(const uint8_t *buf, size_t len)
{
	for (size_t s = 0; s < 4; s++) {
		if (at(buf, len, s * 512, "LABELONE", 8) &&
		    at(buf, len, s * 512 + 24, "LVM2 ", 5))
			return true;
	}
	return false;
}

static bool md_sig(const uint8_t *buf, size_t len)
{
	static const size_t offs[] = { 0, 4096 };

	for (size_t i = 0; i < 2; i++) {
		if (offs[i] + 4 <= len && dv_get_le32(buf + offs[i]) == 0xa92b4efcu)
			return true;
	}
	return false;
}

const char *dv_stripe_signature(const uint8_t *buf, size_t len)
{
	if (at(buf, len, 0, "LUKS\xba\xbe", 6))
		return "LUKS";
	if (at(buf, len, 0, "XFSB", 4))
		return "xfs";
	if (len >= 0x43a && dv_get_le16(buf + 0x438) == 0xef53)
		return "ext2/3/4";
	if (at(buf, len, 0x10040, "_BHRfS_M", 8))
		return "btrfs";
	if (zfs_label(buf, len))
		return "zfs";
	if (lvm_sig(buf, len))
		return "LVM2 physical volume";
	if (swap_sig(buf, len))
		return "swap";
	if (md_sig(buf, len))
		return "Linux RAID (md)";
	if (at(buf, len, 3, "NTFS    ", 8))
		return "ntfs";
	if (at(buf, len, 0x52, "FAT32   ", 8) || at(buf, len, 0x36, "FAT1", 4))
		return "vfat";
	if (at(buf, len, 0x8001, "CD001", 5))
		return "iso9660";
	if (at(buf, len, 512, "EFI PART", 8) || at(buf, len, 4096, "EFI PART", 8))
		return "GPT partition table";
	if (len >= 512 && buf[510] == 0x55 && buf[511] == 0xaa)
		return "MBR partition table or boot sector";
	return NULL;
}

/* ---- one device ---- */

#define REFUSE(d, ...) fmt((d)->reason, sizeof((d)->reason), __VA_ARGS__)

/* A device with our magic: ours, whatever its state. */
static void judge_ours(struct dv_stripe_device *d, const uint8_t *buf,
		       size_t len)
{
	char id[2 * DV_STRIPE_ID_BYTES + 1];
	struct dv_stripe_sb sb;

	d->ours = true;
	if (dv_stripe_sb_decode(buf, len, &sb)) {
		fmt(d->what, sizeof(d->what),
		    "datavo stripe device (damaged superblock)");
		return;
	}
	dv_stripe_id_hex(sb.pool_id, id);
	fmt(d->what, sizeof(d->what), "datavo stripe pool %.12s, device %u of %u",
	    id, sb.dev_index + 1, sb.dev_count);
}

/* Reads the head of an opened device and judges its signature. */
static void judge_head(struct dv_stripe_device *d, int fd, bool may_format)
{
	uint8_t *buf = calloc(1, DV_STRIPE_PROBE_BYTES);
	const char *sig;
	ssize_t n;

	if (!buf) {
		REFUSE(d, "out of memory");
		return;
	}
	n = pread(fd, buf, DV_STRIPE_PROBE_BYTES, 0);
	if (n < 0) {
		REFUSE(d, "cannot read it: %s", strerror(errno));
		goto out;
	}
	if (dv_stripe_sb_has_magic(buf, (size_t)n)) {
		judge_ours(d, buf, (size_t)n);
		goto out;
	}
	sig = dv_stripe_signature(buf, (size_t)n);
	if (!sig) {
		fmt(d->what, sizeof(d->what), "blank");
	} else {
		fmt(d->what, sizeof(d->what), "%s", sig);
		if (may_format)
			d->overwrite = true;
		else
			REFUSE(d, "carries %s: list it with format: true on this tier to overwrite it",
			       sig);
	}
out:
	free(buf);
}

/* Checks of a block device that need no open. false: refused. */
static bool judge_block_sysfs(struct dv_stripe_device *d, const char *name,
			      dev_t dev, const struct machine *m)
{
	struct names parts = { 0 }, holders = { 0 };
	const char *point;
	bool ok = false;

	if (names_has(&m->root, name)) {
		REFUSE(d, "holds the root filesystem or shares its disk or stack (%s)",
		       m->root_dev);
		return false;
	}
	point = mounted_at(m, dev);
	if (point) {
		REFUSE(d, strcmp(point, "swap") ? "mounted at %s" : "active %s",
		       point);
		return false;
	}
	sys_partitions(name, &parts);
	for (size_t i = 0; i < parts.n && !d->reason[0]; i++) {
		point = mounted_at(m, dev_of_name(parts.v[i]));
		if (point)
			REFUSE(d, "its partition %s is mounted at %s", parts.v[i],
			       point);
	}
	if (!d->reason[0] && parts.n)
		REFUSE(d, "has partitions (%s%s): list a partition, or remove the partition table",
		       parts.v[0], parts.n > 1 ? ", ..." : "");
	sys_list(name, "holders", &holders);
	if (!d->reason[0] && holders.n)
		REFUSE(d, "in use by %s (device-mapper, LVM, RAID or dm-crypt)",
		       holders.v[0]);
	if (!d->reason[0] && sys_flag(name, "ro"))
		REFUSE(d, "read-only");
	ok = !d->reason[0];
	names_free(&parts);
	names_free(&holders);
	return ok;
}

static bool auto_candidate(const char *name)
{
	return strncmp(name, "nvme", 4) == 0 || strncmp(name, "sd", 2) == 0;
}

static void judge_block(struct dv_stripe_device *d, dev_t dev, bool is_auto,
			bool may_format, const struct machine *m)
{
	char buf[32];
	int fd;

	if (name_of_dev(dev, d->name, sizeof(d->name))) {
		REFUSE(d, "not known to sysfs");
		return;
	}
	if (sys_read(d->name, "size", buf, sizeof(buf)) == 0)
		d->bytes = strtoull(buf, NULL, 10) * 512;
	if (!judge_block_sysfs(d, d->name, dev, m))
		return;
	if (is_auto && !auto_candidate(d->name)) {
		REFUSE(d, "not an NVMe or SCSI disk: devices: auto skips it (list it by path to use it)");
		return;
	}
	if (is_auto && sys_flag(d->name, "removable")) {
		REFUSE(d, "removable: devices: auto skips it (list it by path to use it)");
		return;
	}
	if (d->bytes == 0) {
		REFUSE(d, "has no medium (size 0)");
		return;
	}
	fd = open(d->path, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EBUSY)
			REFUSE(d, "busy: claimed by the kernel (mounted, swap, RAID, device-mapper, or another datavofs)");
		else
			REFUSE(d, "cannot open it: %s", strerror(errno));
		return;
	}
	judge_head(d, fd, may_format);
	close(fd);
}

/* The loop device a file backs, if any. */
static bool backs_loop(const char *real, char *loop, size_t len)
{
	struct names all = { 0 };
	bool found = false;

	sys_list("", "", &all);
	for (size_t i = 0; i < all.n && !found; i++) {
		char file[PATH_MAX];

		if (strncmp(all.v[i], "loop", 4) != 0 ||
		    sys_read(all.v[i], "loop/backing_file", file, sizeof(file)))
			continue;
		if (strcmp(file, real) == 0) {
			fmt(loop, len, "/dev/%s", all.v[i]);
			found = true;
		}
	}
	names_free(&all);
	return found;
}

static void judge_file(struct dv_stripe_device *d, const struct stat *st,
		       bool may_format)
{
	char real[PATH_MAX], loop[64];
	const char *base = strrchr(d->path, '/');
	int fd;

	d->is_file = true;
	d->bytes = (uint64_t)st->st_size;
	fmt(d->name, sizeof(d->name), "%s", base ? base + 1 : d->path);
	if (realpath(d->path, real) && backs_loop(real, loop, sizeof(loop))) {
		REFUSE(d, "backs %s", loop);
		return;
	}
	fd = open(d->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		REFUSE(d, "cannot open it: %s", strerror(errno));
		return;
	}
	judge_head(d, fd, may_format);
	close(fd);
}

static void judge(struct dv_stripe_device *d, const struct dv_tier_config *tc,
		  bool is_auto, const struct machine *m)
{
	bool may_format = tc->format && !is_auto;
	uint64_t chunk = tc->chunk_bytes ? tc->chunk_bytes : DV_DEFAULT_CHUNK_BYTES;
	struct stat st;

	if (stat(d->path, &st)) {
		REFUSE(d, "%s", strerror(errno));
		return;
	}
	if (S_ISBLK(st.st_mode))
		judge_block(d, st.st_rdev, is_auto, may_format, m);
	else if (S_ISREG(st.st_mode))
		judge_file(d, &st, may_format);
	else
		REFUSE(d, "neither a block device nor a regular file");
	if (!d->reason[0] && d->bytes < DV_STRIPE_DATA_OFFSET + chunk)
		REFUSE(d, "too small for one %" PRIu64 "-byte chunk", chunk);
	d->accepted = !d->reason[0];
}

/* Under auto: every device sysfs lists that is not hidden. */
static int auto_paths(struct names *out)
{
	struct names all = { 0 };

	sys_list("", "", &all);
	for (size_t i = 0; i < all.n; i++) {
		if (!sys_flag(all.v[i], "hidden"))
			names_add(out, all.v[i]);
	}
	names_free(&all);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dv_stripe_discover(const struct dv_tier_config *tc,
		       struct dv_stripe_device **out, size_t *n)
{
	struct names list = { 0 };
	struct dv_stripe_device *v;
	struct machine m;
	bool is_auto = tc->devices_auto || !tc->devices;

	if (is_auto) {
		auto_paths(&list);
		if (list.n > 1)
			qsort(list.v, list.n, sizeof(*list.v), by_name);
	} else {
		/* Not names_add: a device listed twice must stay visible. */
		for (char **p = tc->devices; *p; p++) {
			char **nv = realloc(list.v, (list.n + 1) * sizeof(*nv));

			if (!nv) {
				names_free(&list);
				return -ENOMEM;
			}
			list.v = nv;
			list.v[list.n] = strdup(*p);
			if (!list.v[list.n]) {
				names_free(&list);
				return -ENOMEM;
			}
			list.n++;
		}
	}
	v = calloc(list.n ? list.n : 1, sizeof(*v));
	if (!v) {
		names_free(&list);
		return -ENOMEM;
	}
	machine_load(&m);
	for (size_t i = 0; i < list.n; i++) {
		if (is_auto)
			fmt(v[i].path, sizeof(v[i].path), "/dev/%s", list.v[i]);
		else
			fmt(v[i].path, sizeof(v[i].path), "%s", list.v[i]);
		judge(&v[i], tc, is_auto, &m);
	}
	machine_free(&m);
	*out = v;
	*n = list.n;
	names_free(&list);
	return 0;
}
