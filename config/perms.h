/*
 * How the cache makes its files and directories (tier directories,
 * shards, locks, cached manifests).
 *
 * By default the umask decides: directories are made 0777 and files 0666,
 * less the umask, so a cache in ~/.cache under umask 077 is the user's
 * alone. A tier may instead name a mode and a group (shards.yaml `mode`,
 * `group`) for a cache that several users' daemons share: directories then
 * get exactly that mode, files the same less the x bits, both that group,
 * and directories the setgid bit so that whatever anyone adds keeps it.
 * Only what the cache creates is changed: an existing directory stays as
 * its owner made it.
 */
#ifndef DV_PERMS_H
#define DV_PERMS_H

#include <stdbool.h>
#include <sys/types.h>

struct dv_perms {
	mode_t mode;    /* permission bits of directories; 0: the umask decides */
	gid_t gid;      /* with has_group */
	bool has_group;
};

/* Octal permission bits of a directory ("0770", "750"), the owner's rwx
 * among them. 0, or -EINVAL. */
int dv_parse_dir_mode(const char *s, mode_t *out);

/* A group name or a numeric gid. 0, -ENOENT (no such group) or -EINVAL. */
int dv_parse_group(const char *s, gid_t *out);

/*
 * mkdir -p: each directory it creates follows @perms (NULL: the default).
 * 0 (also when @path exists as a directory) or -errno.
 */
int dv_mkdir_p_perms(const char *path, const struct dv_perms *perms);

/* One directory, made as dv_mkdir_p_perms() makes each. 0 or -errno. */
int dv_mkdir_perms(const char *path, const struct dv_perms *perms);

/*
 * mkostemp(), but the file is made 0666 less the umask rather than 0600.
 * @tmpl ends in "XXXXXX"; @flags as mkostemp's. The fd, or -errno.
 */
int dv_mkstemp(char *tmpl, int flags);

/*
 * Gives the file @fd, made 0666 (less the umask), the mode and group of
 * @perms; nothing when they are the default or already so. 0 or -errno.
 */
int dv_perms_apply_fd(int fd, const struct dv_perms *perms);

#endif
