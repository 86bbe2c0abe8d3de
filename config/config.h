/*
 * shards.yaml: the one configuration file of datavofs.
 *
 * Schema: the tier list plus the top-level keys of docs/design.md. Resolution
 * order (R10): an explicit path, else /etc/datavo/shards.yaml, else
 * ~/.config/datavo/shards.yaml, else a built-in default of one folder tier.
 * Every error names the file, the line and the key in one line. The parser
 * only reads and validates: it creates no directory and opens no network.
 */
#ifndef DV_CONFIG_H
#define DV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum dv_tier_type {
	DV_TIER_TYPE_FOLDER,
	DV_TIER_TYPE_RAM,
	DV_TIER_TYPE_STRIPE,
	DV_TIER_TYPE_S3,
	DV_TIER_TYPE_AZURE_BLOB,
	DV_TIER_TYPE_GCS,
};

enum dv_verify_mode {
	DV_VERIFY_FILL,   /* check sha256 of every byte entering a tier (default) */
	DV_VERIFY_ALWAYS, /* also re-hash a tier file on every open (B3) */
	DV_VERIFY_OFF,
};

/* FUSE over io_uring (fuse_io_uring:): auto uses it where the kernel offers it. */
enum dv_fuse_uring {
	DV_FUSE_URING_AUTO,
	DV_FUSE_URING_ON,  /* the mount fails when it cannot be had */
	DV_FUSE_URING_OFF,
};

/* Where the winning configuration came from (R10). */
enum dv_config_source {
	DV_CONFIG_EXPLICIT,
	DV_CONFIG_SYSTEM,
	DV_CONFIG_USER,
	DV_CONFIG_DEFAULT,
};

#define DV_DEFAULT_TIER_BYTES (50ULL << 30) /* built-in default tier, R10 */
#define DV_DEFAULT_RAM_PATH "/dev/shm/datavo"
#define DV_DEFAULT_CHUNK_BYTES (4ULL << 20)
#define DV_DEFAULT_MANIFEST_TTL 60
#define DV_DEFAULT_METRICS_ADDR "127.0.0.1:9110"
#define DV_DEFAULT_DOLLARS_PER_GB 0.09

struct dv_tier_config {
	enum dv_tier_type type;
	char *name;          /* display name; defaults to "<type>N" */
	int line;            /* line of the entry in the file, 0 if built in */
	uint64_t max_bytes;  /* 0 = unbounded (R8) / informational (R9) */

	/* folder, ram */
	char *path;          /* ~ and $VAR already expanded (R12) */
	mode_t mode;         /* directories' mode; 0: the umask decides */
	gid_t gid;           /* group of what the tier creates, with has_group */
	bool has_group;

	/* stripe */
	char **devices;      /* NULL-terminated; NULL with devices_auto */
	bool devices_auto;
	uint64_t chunk_bytes;
	bool format;         /* allow devices that carry a foreign signature */

	/* s3, gcs */
	char *bucket;
	char *region;        /* s3 */
	char *project;       /* gcs */
	/* azure_blob */
	char *container_url;
	char *sas_token;     /* a secret: never log it */
	char *managed_identity_client_id;
	/* every cloud tier */
	char *prefix;
	char *endpoint;      /* S3-compatible stores, emulators */
};

struct dv_http_config {
	unsigned connect_timeout; /* seconds */
	unsigned low_speed_time;  /* seconds below low_speed_limit → timeout */
	unsigned low_speed_limit; /* bytes per second */
	unsigned retries;         /* extra attempts on 5xx, resets, timeouts */
	char *ca_file;
	char *ca_path;
};

/* How cold shards with a chunk list are filled (fill: in shards.yaml). */
struct dv_fill_config {
	bool streaming;           /* serve reads while the shard fills */
	unsigned parallel;        /* ranged fetches in flight per shard */
	unsigned connections;     /* ranged fetches in flight per daemon */
	unsigned timeout;         /* seconds a read waits for its chunks */
};

#define DV_FILL_PARALLEL 8
#define DV_FILL_CONNECTIONS 32
#define DV_FILL_TIMEOUT 60

/*
 * One write-back area (writeback: in shards.yaml): MOUNTPOINT/<name>/ is a
 * writable directory kept in a local landing folder, whose closed files
 * are uploaded to a destination in the background (fs/writeback/).
 */
enum dv_wb_dest {
	DV_WB_DEST_FILE, /* file:///path: a directory (local disk, NFS) */
	DV_WB_DEST_S3,   /* s3://bucket/prefix */
};

struct dv_writeback_config {
	char *name;          /* the directory at the root of the mount */
	int line;            /* of the entry, for messages */
	char *destination;   /* as written */
	enum dv_wb_dest dest;
	char *path;          /* the landing folder (expanded, absolute) */
	uint64_t max_bytes;  /* landing folder budget; 0 = unbounded */
	/*
	 * Where to upload, as a tier of the matching type would have it:
	 * bucket and prefix (s3) or path (file) come from the destination,
	 * region and endpoint from the entry's own keys.
	 */
	struct dv_tier_config remote;
};

struct dv_config {
	char *path;                   /* file that was read; NULL for default */
	enum dv_config_source source;
	char *origin;                 /* NULL when not configured */
	enum dv_verify_mode verify;
	enum dv_fuse_uring fuse_io_uring;
	unsigned manifest_ttl;        /* seconds */
	char *metrics;                /* "ADDR:PORT"; NULL = off */
	double dollars_per_gb;        /* egress price for "dollars saved" */
	char *state_dir;              /* manifest cache; NULL = default */
	struct dv_http_config http;
	struct dv_fill_config fill;
	struct dv_tier_config *tiers;
	size_t ntiers;
	struct dv_writeback_config *writebacks;
	size_t nwritebacks;
};

/* Paths searched by dv_config_resolve(); tests point them elsewhere. */
struct dv_config_paths {
	const char *system_path; /* default "/etc/datavo/shards.yaml" */
	const char *user_path;   /* default "~/.config/datavo/shards.yaml" */
};

/*
 * Resolves and loads the configuration (R10). @explicit_path may be NULL.
 * @paths may be NULL for the real system and user paths. An explicit path
 * that does not exist is an error; the others are skipped when absent.
 * On error returns -errno (-EINVAL for a bad file) and, when @err is not
 * NULL, writes one line naming file, line and key into @err.
 * On success *@out is a new config owned by the caller (dv_config_free).
 */
int dv_config_resolve(const char *explicit_path,
		      const struct dv_config_paths *paths,
		      struct dv_config **out, char *err, size_t errlen);

/* Loads one file (no resolution). Same contract as dv_config_resolve(). */
int dv_config_load_file(const char *path, struct dv_config **out, char *err,
			size_t errlen);

/* Parses YAML text; @path is used in messages only. */
int dv_config_parse(const char *text, size_t len, const char *path,
		    struct dv_config **out, char *err, size_t errlen);

/* The built-in default: one folder tier (R10). */
int dv_config_default(struct dv_config **out, char *err, size_t errlen);

void dv_config_free(struct dv_config *cfg);

/* Receives one warning of dv_config_file_warnings() (a line, no secret). */
typedef void (*dv_config_warn_fn)(void *arg, const char *msg);

/*
 * Checks the mode of the file @cfg was read from (nothing for a built-in
 * config): a secret in it (a sas_token, credentials in the origin URL)
 * readable by its group or everyone, or a file anyone can write, each
 * calls @fn once. The daemon and `datavoctl inspect` share it.
 */
void dv_config_file_warnings(const struct dv_config *cfg, dv_config_warn_fn fn,
			     void *arg);

const char *dv_tier_type_name(enum dv_tier_type type);
const char *dv_config_source_name(enum dv_config_source source);
const char *dv_verify_mode_name(enum dv_verify_mode mode);
const char *dv_fuse_uring_name(enum dv_fuse_uring mode);

/* "auto", "on" or "off" into *@out: 0, or -EINVAL leaving *@out alone. */
int dv_config_lookup_fuse_uring(const char *s, enum dv_fuse_uring *out);

/*
 * The state directory when the config sets no state_dir: /var/cache/datavo
 * for root, else ~/.cache/altavo/datavo, else $XDG_RUNTIME_DIR/datavo.
 * Written into @buf, which is returned; NULL when there is none (never a
 * shared, predictable path such as /tmp). The one place this policy
 * lives: the daemon, its stripe tiers and datavoctl all ask here.
 */
const char *dv_config_default_state_dir(char *buf, size_t len);

/*
 * Where the daemon caches manifests (one subdirectory per origin): the
 * config's state_dir, else <the default state directory>/manifests.
 * Written into @buf, which is returned; NULL when there is none.
 */
const char *dv_config_manifest_base(const struct dv_config *cfg, char *buf,
				    size_t len);

/* What to tell a user when there is no state directory. */
#define DV_CONFIG_NO_STATE_DIR \
	"no state directory: HOME is unset and so is XDG_RUNTIME_DIR; set state_dir (or -o state_dir=PATH)"

/* Folder and ram tiers hold plain files (R6 counts these). */
bool dv_tier_type_is_folder(enum dv_tier_type type);

#endif
