/*
 * config/config.c: every YAML example of the original schema, the resolution order
 * (R10), the legacy root key (R11), the folder-tier rule (R6), expansion
 * (R12), defaults, and bad files whose one-line messages must name the
 * file, the line and the key.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/log.h"
#include "config/util.h"
#include "helpers.h"

#define FILE_NAME "/etc/datavo/shards.yaml"

static char err[1024];

static struct dv_config *parse_ok(const char *yaml)
{
	struct dv_config *cfg = NULL;
	int ret;

	err[0] = '\0';
	ret = dv_config_parse(yaml, strlen(yaml), FILE_NAME, &cfg, err,
			      sizeof(err));
	ck_assert_msg(ret == 0, "parse failed (%d): %s", ret, err);
	ck_assert_ptr_nonnull(cfg);
	return cfg;
}

static int parse_bad(const char *yaml)
{
	struct dv_config *cfg = (struct dv_config *)&err; /* must be reset */
	int ret;

	err[0] = '\0';
	ret = dv_config_parse(yaml, strlen(yaml), FILE_NAME, &cfg, err,
			      sizeof(err));
	ck_assert_msg(ret < 0, "'%s' should not parse", yaml);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strchr(err, '\n') == NULL, "not one line: %s", err);
	return ret;
}

/* The message names the file, the line and, when given, the key. */
static void expect_error_at(const char *yaml, int line, const char *key,
			    const char *what)
{
	char want[128];

	ck_assert_int_eq(parse_bad(yaml), -EINVAL);
	snprintf(want, sizeof(want), FILE_NAME ":%d: ", line);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
		      "want '%s' at the start of: %s", want, err);
	if (key) {
		snprintf(want, sizeof(want), "key '%s'", key);
		ck_assert_msg(strstr(err, want), "want %s in: %s", want, err);
	}
	if (what)
		ck_assert_msg(strstr(err, what), "want '%s' in: %s", what, err);
}

static const struct dv_tier_config *tier(const struct dv_config *cfg,
					 size_t i)
{
	ck_assert_uint_lt(i, cfg->ntiers);
	return &cfg->tiers[i];
}

static void expect_tier(const struct dv_config *cfg, size_t i,
			const char *name, enum dv_tier_type type, int line)
{
	const struct dv_tier_config *t = tier(cfg, i);

	ck_assert_str_eq(t->name, name);
	ck_assert_int_eq(t->type, type);
	ck_assert_int_eq(t->line, line);
}

/* The original schema example, verbatim. */
static const char seed_schema[] =
	"tiers:\n"
	"  - name: scratch\n"
	"    type: folder                  # default; can be omitted\n"
	"    path: /scratch/datavo/shards\n"
	"    max_bytes: 1TB\n"
	"  - name: home\n"
	"    path: ~/.cache/altavo/datavo/shards\n"
	"    max_bytes: 50GB\n"
	"  - name: region-eastus\n"
	"    type: azure_blob\n"
	"    container_url: https://datavoeastus.blob.core.windows.net/shards\n"
	"    # sas_token: \"...\"            # optional; otherwise DefaultAzureCredential\n"
	"    # prefix: \"team-a\"            # optional namespacing inside the container\n"
	"    # managed_identity_client_id: \"...\"   # optional; specific UAMI client id\n"
	"  - name: region-us-east-1\n"
	"    type: s3\n"
	"    bucket: datavo-cache-us-east-1\n"
	"    region: us-east-1\n"
	"    # prefix: \"team-a\"\n"
	"  - name: region-us-central1\n"
	"    type: gcs\n"
	"    bucket: datavo-cache-us-central1\n"
	"    # project: \"datavo-prod\"      # optional\n"
	"    # prefix: \"team-a\"\n";

START_TEST(test_seed_schema_example)
{
	struct dv_config *cfg;

	setenv("HOME", "/home/ada", 1);
	cfg = parse_ok(seed_schema);
	ck_assert_uint_eq(cfg->ntiers, 5);
	expect_tier(cfg, 0, "scratch", DV_TIER_TYPE_FOLDER, 2);
	ck_assert_str_eq(tier(cfg, 0)->path, "/scratch/datavo/shards");
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 1ULL << 40);
	expect_tier(cfg, 1, "home", DV_TIER_TYPE_FOLDER, 6);
	ck_assert_str_eq(tier(cfg, 1)->path,
			 "/home/ada/.cache/altavo/datavo/shards");
	ck_assert_uint_eq(tier(cfg, 1)->max_bytes, 50ULL << 30);
	expect_tier(cfg, 2, "region-eastus", DV_TIER_TYPE_AZURE_BLOB, 9);
	ck_assert_str_eq(tier(cfg, 2)->container_url,
			 "https://datavoeastus.blob.core.windows.net/shards");
	ck_assert_ptr_null(tier(cfg, 2)->sas_token);
	ck_assert_ptr_null(tier(cfg, 2)->prefix);
	ck_assert_ptr_null(tier(cfg, 2)->managed_identity_client_id);
	ck_assert_uint_eq(tier(cfg, 2)->max_bytes, 0);
	expect_tier(cfg, 3, "region-us-east-1", DV_TIER_TYPE_S3, 15);
	ck_assert_str_eq(tier(cfg, 3)->bucket, "datavo-cache-us-east-1");
	ck_assert_str_eq(tier(cfg, 3)->region, "us-east-1");
	ck_assert_ptr_null(tier(cfg, 3)->prefix);
	expect_tier(cfg, 4, "region-us-central1", DV_TIER_TYPE_GCS, 20);
	ck_assert_str_eq(tier(cfg, 4)->bucket, "datavo-cache-us-central1");
	ck_assert_ptr_null(tier(cfg, 4)->project);
	dv_config_free(cfg);
}
END_TEST

/* The same schema with its commented optional fields filled in. */
START_TEST(test_seed_schema_optional_fields)
{
	static const char yaml[] =
		"tiers:\n"
		"  - path: /scratch\n"
		"  - name: region-eastus\n"
		"    type: azure_blob\n"
		"    container_url: https://datavoeastus.blob.core.windows.net/shards\n"
		"    sas_token: \"sv=2024&sig=abc\"\n"
		"    prefix: \"team-a\"\n"
		"    managed_identity_client_id: \"1234-abcd\"\n"
		"    endpoint: http://127.0.0.1:10000/devstoreaccount1\n"
		"  - type: s3\n"
		"    bucket: b\n"
		"    prefix: team-a\n"
		"    endpoint: http://localhost:9000\n"
		"    max_bytes: 100GB\n"
		"  - type: gcs\n"
		"    bucket: g\n"
		"    project: \"datavo-prod\"\n"
		"    prefix: \"team-a\"\n";
	struct dv_config *cfg = parse_ok(yaml);

	ck_assert_str_eq(tier(cfg, 1)->sas_token, "sv=2024&sig=abc");
	ck_assert_str_eq(tier(cfg, 1)->prefix, "team-a");
	ck_assert_str_eq(tier(cfg, 1)->managed_identity_client_id,
			 "1234-abcd");
	ck_assert_str_eq(tier(cfg, 1)->endpoint,
			 "http://127.0.0.1:10000/devstoreaccount1");
	expect_tier(cfg, 2, "s32", DV_TIER_TYPE_S3, 10);
	ck_assert_str_eq(tier(cfg, 2)->endpoint, "http://localhost:9000");
	ck_assert_uint_eq(tier(cfg, 2)->max_bytes, 100ULL << 30);
	ck_assert_ptr_null(tier(cfg, 2)->region);
	expect_tier(cfg, 3, "gcs3", DV_TIER_TYPE_GCS, 15);
	ck_assert_str_eq(tier(cfg, 3)->project, "datavo-prod");
	ck_assert_str_eq(tier(cfg, 3)->prefix, "team-a");
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_seed_gpu_workstation)
{
	static const char yaml[] = "# /etc/datavo/shards.yaml\n"
				   "tiers:\n"
				   "  - name: local\n"
				   "    path: /var/cache/datavo/shards\n"
				   "    max_bytes: 200GB\n"
				   "  - name: scratch\n"
				   "    path: /scratch/datavo/shards\n"
				   "    max_bytes: 5TB\n";
	struct dv_config *cfg = parse_ok(yaml);

	ck_assert_uint_eq(cfg->ntiers, 2);
	expect_tier(cfg, 0, "local", DV_TIER_TYPE_FOLDER, 3);
	ck_assert_str_eq(tier(cfg, 0)->path, "/var/cache/datavo/shards");
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 200ULL << 30);
	expect_tier(cfg, 1, "scratch", DV_TIER_TYPE_FOLDER, 6);
	ck_assert_str_eq(tier(cfg, 1)->path, "/scratch/datavo/shards");
	ck_assert_uint_eq(tier(cfg, 1)->max_bytes, 5ULL << 40);
	dv_config_free(cfg);
}
END_TEST

static const char seed_cloud_nvme[] = "  - name: nvme\n"
				      "    path: /mnt/cache/datavo/shards\n"
				      "    max_bytes: 200GB\n";

static struct dv_config *parse_cloud(const char *header, const char *remote)
{
	char yaml[1024];

	snprintf(yaml, sizeof(yaml), "%stiers:\n%s%s", header, seed_cloud_nvme,
		 remote);
	return parse_ok(yaml);
}

static void expect_nvme(const struct dv_config *cfg, int line)
{
	ck_assert_uint_eq(cfg->ntiers, 2);
	expect_tier(cfg, 0, "nvme", DV_TIER_TYPE_FOLDER, line);
	ck_assert_str_eq(tier(cfg, 0)->path, "/mnt/cache/datavo/shards");
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 200ULL << 30);
}

START_TEST(test_seed_cloud_azure)
{
	struct dv_config *cfg = parse_cloud(
		"# /etc/datavo/shards.yaml on each GPU VM in eastus (Azure)\n",
		"  - name: region-eastus\n"
		"    type: azure_blob\n"
		"    container_url: https://datavoeastus.blob.core.windows.net/shards\n"
		"    # managed identity picks up the VM's identity; no secrets in this file\n");

	expect_nvme(cfg, 3);
	expect_tier(cfg, 1, "region-eastus", DV_TIER_TYPE_AZURE_BLOB, 6);
	ck_assert_str_eq(tier(cfg, 1)->container_url,
			 "https://datavoeastus.blob.core.windows.net/shards");
	ck_assert_ptr_null(tier(cfg, 1)->sas_token);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_seed_cloud_aws)
{
	struct dv_config *cfg = parse_cloud("# us-east-1 on AWS\n",
					    "  - name: region-us-east-1\n"
					    "    type: s3\n"
					    "    bucket: datavo-cache-us-east-1\n"
					    "    region: us-east-1\n");

	expect_nvme(cfg, 3);
	expect_tier(cfg, 1, "region-us-east-1", DV_TIER_TYPE_S3, 6);
	ck_assert_str_eq(tier(cfg, 1)->bucket, "datavo-cache-us-east-1");
	ck_assert_str_eq(tier(cfg, 1)->region, "us-east-1");
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_seed_cloud_gcp)
{
	struct dv_config *cfg = parse_cloud("# us-central1 on GCP\n",
					    "  - name: region-us-central1\n"
					    "    type: gcs\n"
					    "    bucket: datavo-cache-us-central1\n");

	expect_nvme(cfg, 3);
	expect_tier(cfg, 1, "region-us-central1", DV_TIER_TYPE_GCS, 6);
	ck_assert_str_eq(tier(cfg, 1)->bucket, "datavo-cache-us-central1");
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_json_flow_style)
{
	static const char json[] =
		"{\"tiers\": [{\"name\": \"fast\", \"path\": \"/tmp/fast\",\n"
		"             \"max_bytes\": 10737418240},\n"
		"            {\"name\": \"slow\", \"path\": \"/tmp/slow\"}],\n"
		" \"verify\": \"always\", \"manifest_ttl\": 5, \"metrics\": true}\n";
	struct dv_config *cfg = parse_ok(json);

	ck_assert_uint_eq(cfg->ntiers, 2);
	expect_tier(cfg, 0, "fast", DV_TIER_TYPE_FOLDER, 1);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 10ULL << 30);
	expect_tier(cfg, 1, "slow", DV_TIER_TYPE_FOLDER, 3);
	ck_assert_int_eq(cfg->verify, DV_VERIFY_ALWAYS);
	ck_assert_uint_eq(cfg->manifest_ttl, 5);
	ck_assert_str_eq(cfg->metrics, DV_DEFAULT_METRICS_ADDR);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_defaults)
{
	struct dv_config *cfg = parse_ok("tiers:\n  - path: /a\n");

	ck_assert_ptr_null(cfg->origin);
	ck_assert_int_eq(cfg->verify, DV_VERIFY_FILL);
	ck_assert_uint_eq(cfg->manifest_ttl, DV_DEFAULT_MANIFEST_TTL);
	ck_assert_ptr_null(cfg->metrics);
	ck_assert_double_eq(cfg->dollars_per_gb, DV_DEFAULT_DOLLARS_PER_GB);
	ck_assert_ptr_null(cfg->state_dir);
	ck_assert_uint_eq(cfg->http.connect_timeout, 10);
	ck_assert_uint_eq(cfg->http.low_speed_time, 30);
	ck_assert_uint_eq(cfg->http.low_speed_limit, 1024);
	ck_assert_uint_eq(cfg->http.retries, 4);
	ck_assert_ptr_null(cfg->http.ca_file);
	ck_assert_ptr_null(cfg->http.ca_path);
	/* dv_config_parse reads no file: path is for messages only. */
	ck_assert_ptr_null(cfg->path);
	expect_tier(cfg, 0, "folder0", DV_TIER_TYPE_FOLDER, 2);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 0); /* R8: unbounded */
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_every_top_level_key)
{
	static const char yaml[] = "origin: https://origin.example/datavo\n"
				   "verify: always\n"
				   "manifest_ttl: 300\n"
				   "metrics: 0.0.0.0:9999\n"
				   "dollars_per_gb: 0.12\n"
				   "state_dir: $DV_T_STATE/manifests\n"
				   "http:\n"
				   "  connect_timeout: 3\n"
				   "  low_speed_time: 7\n"
				   "  low_speed_limit: 100\n"
				   "  retries: 0\n"
				   "  ca_file: ~/ca.pem\n"
				   "  ca_path: ${DV_T_STATE}/certs\n"
				   "tiers:\n"
				   "  - path: /a\n";
	struct dv_config *cfg;

	setenv("HOME", "/home/ada", 1);
	setenv("DV_T_STATE", "/var/lib/datavo", 1);
	cfg = parse_ok(yaml);
	ck_assert_str_eq(cfg->origin, "https://origin.example/datavo");
	ck_assert_int_eq(cfg->verify, DV_VERIFY_ALWAYS);
	ck_assert_uint_eq(cfg->manifest_ttl, 300);
	ck_assert_str_eq(cfg->metrics, "0.0.0.0:9999");
	ck_assert_double_eq_tol(cfg->dollars_per_gb, 0.12, 1e-12);
	ck_assert_str_eq(cfg->state_dir, "/var/lib/datavo/manifests");
	ck_assert_uint_eq(cfg->http.connect_timeout, 3);
	ck_assert_uint_eq(cfg->http.low_speed_time, 7);
	ck_assert_uint_eq(cfg->http.low_speed_limit, 100);
	ck_assert_uint_eq(cfg->http.retries, 0);
	ck_assert_str_eq(cfg->http.ca_file, "/home/ada/ca.pem");
	ck_assert_str_eq(cfg->http.ca_path, "/var/lib/datavo/certs");
	ck_assert_uint_eq(cfg->ntiers, 1);
	expect_tier(cfg, 0, "folder0", DV_TIER_TYPE_FOLDER, 15);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_verify_modes_and_origins)
{
	static const char *const origins[] = {
		"http://o/x", "https://o/x", "file:///srv/o", "s3://b/p", "/srv/o",
	};
	static const char *const modes[] = { "fill", "always", "off" };
	char yaml[256];
	struct dv_config *cfg;
	size_t i;

	for (i = 0; i < 3; i++) {
		snprintf(yaml, sizeof(yaml),
			 "verify: %s\norigin: %s\ntiers: [{path: /a}]\n",
			 modes[i], origins[i]);
		cfg = parse_ok(yaml);
		ck_assert_int_eq(cfg->verify, (int)i);
		ck_assert_str_eq(dv_verify_mode_name(cfg->verify), modes[i]);
		ck_assert_str_eq(cfg->origin, origins[i]);
		dv_config_free(cfg);
	}
	for (i = 3; i < 5; i++) {
		snprintf(yaml, sizeof(yaml), "origin: '%s'\ntiers: [{path: /a}]\n",
			 origins[i]);
		cfg = parse_ok(yaml);
		ck_assert_str_eq(cfg->origin, origins[i]);
		dv_config_free(cfg);
	}
}
END_TEST

START_TEST(test_fuse_io_uring)
{
	static const char *const modes[] = { "auto", "on", "off" };
	char yaml[128];
	struct dv_config *cfg;
	enum dv_fuse_uring m = DV_FUSE_URING_OFF;
	size_t i;

	cfg = parse_ok("tiers: [{path: /a}]\n");
	ck_assert_int_eq(cfg->fuse_io_uring, DV_FUSE_URING_AUTO);
	dv_config_free(cfg);
	/* Unquoted on and off are strings to libyaml, as YAML 1.2 has it. */
	for (i = 0; i < 3; i++) {
		snprintf(yaml, sizeof(yaml), "fuse_io_uring: %s\ntiers: [{path: /a}]\n",
			 modes[i]);
		cfg = parse_ok(yaml);
		ck_assert_int_eq(cfg->fuse_io_uring, (int)i);
		ck_assert_str_eq(dv_fuse_uring_name(cfg->fuse_io_uring), modes[i]);
		dv_config_free(cfg);
	}
	ck_assert_int_eq(dv_config_lookup_fuse_uring("yes", &m), -EINVAL);
	ck_assert_int_eq(m, DV_FUSE_URING_OFF);
	ck_assert_int_eq(dv_config_lookup_fuse_uring("on", &m), 0);
	ck_assert_int_eq(m, DV_FUSE_URING_ON);
}
END_TEST

START_TEST(test_metrics_forms)
{
	struct dv_config *cfg;

	cfg = parse_ok("metrics: true\ntiers: [{path: /a}]\n");
	ck_assert_str_eq(cfg->metrics, DV_DEFAULT_METRICS_ADDR);
	dv_config_free(cfg);
	cfg = parse_ok("metrics: false\ntiers: [{path: /a}]\n");
	ck_assert_ptr_null(cfg->metrics);
	dv_config_free(cfg);
	cfg = parse_ok("metrics: \"[::1]:9110\"\ntiers: [{path: /a}]\n");
	ck_assert_str_eq(cfg->metrics, "[::1]:9110");
	dv_config_free(cfg);
	cfg = parse_ok("metrics: localhost:9000\ntiers: [{path: /a}]\n");
	ck_assert_str_eq(cfg->metrics, "localhost:9000");
	dv_config_free(cfg);
}
END_TEST

/* `key:` with no value, `~` or `null` mean "not set": the default holds. */
START_TEST(test_null_values_are_absent)
{
	static const char yaml[] = "origin:\n"
				   "metrics: ~\n"
				   "tiers:\n"
				   "  - path: /a\n"
				   "    max_bytes: null\n"
				   "    name:\n"
				   "  - type: ram\n"
				   "    max_bytes:\n";
	struct dv_config *cfg = parse_ok(yaml);

	ck_assert_ptr_null(cfg->origin);
	ck_assert_ptr_null(cfg->metrics);
	expect_tier(cfg, 0, "folder0", DV_TIER_TYPE_FOLDER, 4);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 0);
	ck_assert_uint_eq(tier(cfg, 1)->max_bytes, dv_physical_memory() / 4);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_sizes_in_max_bytes)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} sizes[] = {
		{ "1TB", 1ULL << 40 },	   { "50GB", 50ULL << 30 },
		{ "\"512 MiB\"", 512ULL << 20 }, { "512 MiB", 512ULL << 20 },
		{ "0", 0 },		   { "1099511627776", 1ULL << 40 },
		{ "'4kb'", 4096 },	   { "7", 7 },
	};
	char yaml[128];
	struct dv_config *cfg;
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(yaml, sizeof(yaml),
			 "tiers:\n  - path: /a\n    max_bytes: %s\n",
			 sizes[i].text);
		cfg = parse_ok(yaml);
		ck_assert_uint_eq(tier(cfg, 0)->max_bytes, sizes[i].bytes);
		dv_config_free(cfg);
	}
}
END_TEST

START_TEST(test_sizes_rejected)
{
	expect_error_at("tiers:\n  - path: /a\n    max_bytes: 1.5GB\n", 3,
			"max_bytes", "'1.5GB' is not a size");
	expect_error_at("tiers:\n  - path: /a\n    max_bytes: -1\n", 3,
			"max_bytes", "negative");
	expect_error_at("tiers:\n  - path: /a\n    max_bytes: 20000000PB\n", 3,
			"max_bytes", "too large");
}
END_TEST

/* A folder tier's mode and group (a cache shared by several users). */
START_TEST(test_tier_mode_and_group)
{
	struct dv_config *cfg;
	const char *yaml = "tiers:\n  - path: /a\n    mode: 0770\n    group: root\n"
			   "  - path: /b\n    mode: \"750\"\n    group: 4242\n"
			   "  - path: /c\n";

	cfg = parse_ok(yaml);
	ck_assert_uint_eq(cfg->tiers[0].mode, 0770);
	ck_assert(cfg->tiers[0].has_group);
	ck_assert_uint_eq(cfg->tiers[0].gid, 0);
	ck_assert_uint_eq(cfg->tiers[1].mode, 0750);
	ck_assert(cfg->tiers[1].has_group);
	ck_assert_uint_eq(cfg->tiers[1].gid, 4242);
	/* Neither: the umask decides. */
	ck_assert_uint_eq(cfg->tiers[2].mode, 0);
	ck_assert(!cfg->tiers[2].has_group);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_tier_mode_and_group_rejected)
{
	expect_error_at("tiers:\n  - path: /a\n    mode: 0778\n", 3, "mode",
			"'0778' is not an octal mode");
	expect_error_at("tiers:\n  - path: /a\n    mode: rwxrwx---\n", 3, "mode",
			"'rwxrwx---' is not an octal mode");
	expect_error_at("tiers:\n  - path: /a\n    mode: 04770\n", 3, "mode",
			"is not an octal mode");
	/* The daemon itself must be able to use what it makes. */
	expect_error_at("tiers:\n  - path: /a\n    mode: 0070\n", 3, "mode",
			"rwx for their owner");
	expect_error_at("tiers:\n  - path: /a\n    group: no-such-group-dv\n", 3,
			"group", "'no-such-group-dv' is not a group");
	expect_error_at("tiers:\n  - path: /a\n    group: \"\"\n", 3, "group",
			NULL);
	expect_error_at("tiers:\n  - path: /a\n  - type: s3\n    bucket: b\n    mode: 0770\n",
			5, "mode", "not valid for an s3 tier");
}
END_TEST

START_TEST(test_tier_default_names)
{
	static const char yaml[] = "tiers:\n"
				   "  - type: ram\n"
				   "  - path: /a\n"
				   "  - type: stripe\n"
				   "    devices: auto\n"
				   "  - type: s3\n"
				   "    bucket: b\n"
				   "  - type: azure_blob\n"
				   "    container_url: https://a.blob.core.windows.net/c\n"
				   "  - type: gcs\n"
				   "    bucket: g\n";
	struct dv_config *cfg = parse_ok(yaml);

	ck_assert_uint_eq(cfg->ntiers, 6);
	expect_tier(cfg, 0, "ram0", DV_TIER_TYPE_RAM, 2);
	expect_tier(cfg, 1, "folder1", DV_TIER_TYPE_FOLDER, 3);
	expect_tier(cfg, 2, "stripe2", DV_TIER_TYPE_STRIPE, 4);
	expect_tier(cfg, 3, "s33", DV_TIER_TYPE_S3, 6);
	expect_tier(cfg, 4, "azure_blob4", DV_TIER_TYPE_AZURE_BLOB, 8);
	expect_tier(cfg, 5, "gcs5", DV_TIER_TYPE_GCS, 10);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_ram_defaults)
{
	static const char yaml[] = "tiers:\n"
				   "  - type: ram\n"
				   "  - type: ram\n"
				   "    name: small\n"
				   "    path: /dev/shm/mine\n"
				   "    max_bytes: 1GiB\n"
				   "  - type: ram\n"
				   "    name: unbounded\n"
				   "    max_bytes: 0\n";
	struct dv_config *cfg = parse_ok(yaml);

	ck_assert_uint_gt(dv_physical_memory(), 0);
	ck_assert_str_eq(tier(cfg, 0)->path, DV_DEFAULT_RAM_PATH);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, dv_physical_memory() / 4);
	ck_assert_str_eq(tier(cfg, 1)->path, "/dev/shm/mine");
	ck_assert_uint_eq(tier(cfg, 1)->max_bytes, 1ULL << 30);
	/* An explicit 0 is unbounded (R8), not the 25% default. */
	ck_assert_str_eq(tier(cfg, 2)->path, DV_DEFAULT_RAM_PATH);
	ck_assert_uint_eq(tier(cfg, 2)->max_bytes, 0);
	ck_assert(dv_tier_type_is_folder(DV_TIER_TYPE_RAM));
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_stripe_tier)
{
	static const char yaml[] = "tiers:\n"
				   "  - path: /a\n"
				   "  - name: nvme\n"
				   "    type: stripe\n"
				   "    devices: [/dev/nvme0n1, \"$DV_T_DEV\"]\n"
				   "    chunk_bytes: 1MiB\n"
				   "    format: true\n"
				   "    max_bytes: 2TB\n"
				   "  - name: auto\n"
				   "    type: stripe\n"
				   "    devices: auto\n";
	struct dv_config *cfg;
	const struct dv_tier_config *t;

	setenv("DV_T_DEV", "/dev/nvme1n1", 1);
	cfg = parse_ok(yaml);
	t = tier(cfg, 1);
	ck_assert_int_eq(t->type, DV_TIER_TYPE_STRIPE);
	ck_assert(!t->devices_auto);
	ck_assert_str_eq(t->devices[0], "/dev/nvme0n1");
	ck_assert_str_eq(t->devices[1], "/dev/nvme1n1");
	ck_assert_ptr_null(t->devices[2]);
	ck_assert_uint_eq(t->chunk_bytes, 1ULL << 20);
	ck_assert(t->format);
	ck_assert_uint_eq(t->max_bytes, 2ULL << 40);
	t = tier(cfg, 2);
	ck_assert(t->devices_auto);
	ck_assert_ptr_null(t->devices);
	ck_assert_uint_eq(t->chunk_bytes, DV_DEFAULT_CHUNK_BYTES);
	ck_assert(!t->format);
	ck_assert(!dv_tier_type_is_folder(DV_TIER_TYPE_STRIPE));
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r12_expand)
{
	static const char yaml[] = "state_dir: ~/state\n"
				   "tiers:\n"
				   "  - name: a\n"
				   "    path: $DV_T_ROOT/shards\n"
				   "  - name: b\n"
				   "    path: ${DV_T_ROOT}/b/${USER_T}x\n"
				   "  - name: c\n"
				   "    path: \"~\"\n"; /* a bare ~ is YAML null */
	struct dv_config *cfg;

	setenv("HOME", "/home/ada", 1);
	setenv("DV_T_ROOT", "/scratch", 1);
	setenv("USER_T", "ada", 1);
	cfg = parse_ok(yaml);
	ck_assert_str_eq(cfg->state_dir, "/home/ada/state");
	ck_assert_str_eq(tier(cfg, 0)->path, "/scratch/shards");
	ck_assert_str_eq(tier(cfg, 1)->path, "/scratch/b/adax");
	ck_assert_str_eq(tier(cfg, 2)->path, "/home/ada");
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r12_unset_var_names_key)
{
	unsetenv("DV_T_NOPE");
	expect_error_at("tiers:\n  - name: a\n    path: $DV_T_NOPE/x\n", 3,
			"path", "$DV_T_NOPE");
	expect_error_at("tiers: [{path: /a}]\nhttp:\n  ca_file: ${DV_T_NOPE}\n",
			3, "http.ca_file", "not set");
	expect_error_at("state_dir: $DV_T_NOPE\ntiers: [{path: /a}]\n", 1,
			"state_dir", "not set");
	expect_error_at("tiers:\n  - path: /a\n  - type: stripe\n"
			"    devices:\n      - /dev/sda\n      - $DV_T_NOPE\n",
			6, "devices", "not set");
}
END_TEST

static char captured[1024];
static int ncaptured;

static void capture_sink(enum dv_log_level level, const char *line)
{
	if (level == DV_LOG_WARNING) {
		snprintf(captured, sizeof(captured), "%s", line);
		ncaptured++;
	}
}

START_TEST(test_r11_root_warns)
{
	static const char yaml[] = "tiers:\n"
				   "  - path: /a\n"
				   "root: https://legacy.example/datavo\n";
	struct dv_config *cfg;

	ncaptured = 0;
	dv_log_set_sink(capture_sink);
	cfg = parse_ok(yaml);
	dv_log_set_sink(NULL);
	ck_assert_int_eq(ncaptured, 1);
	ck_assert_msg(strstr(captured, FILE_NAME ":3:"), "%s", captured);
	ck_assert_msg(strstr(captured, "'root'"), "%s", captured);
	ck_assert_msg(strstr(captured, "ignored"), "%s", captured);
	/* Ignored: it sets neither the origin nor anything else. */
	ck_assert_ptr_null(cfg->origin);
	ck_assert_uint_eq(cfg->ntiers, 1);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r11_root_warns_even_empty)
{
	struct dv_config *cfg;

	ncaptured = 0;
	dv_log_set_sink(capture_sink);
	cfg = parse_ok("root:\ntiers: [{path: /a}]\n");
	dv_log_set_sink(NULL);
	ck_assert_int_eq(ncaptured, 1);
	ck_assert_msg(strstr(captured, FILE_NAME ":1:"), "%s", captured);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r6_needs_folder)
{
	struct dv_config *cfg;

	expect_error_at("tiers:\n"
			"  - type: s3\n"
			"    bucket: b\n"
			"  - type: gcs\n"
			"    bucket: g\n"
			"  - type: stripe\n"
			"    devices: auto\n",
			2, "tiers", "folder");
	/* A ram tier is folder-backed. */
	cfg = parse_ok("tiers:\n  - type: s3\n    bucket: b\n  - type: ram\n");
	ck_assert_uint_eq(cfg->ntiers, 2);
	dv_config_free(cfg);
}
END_TEST

/* Bad files: each names the file, the exact line and the key. */
static const struct bad_config {
	const char *what;
	const char *yaml;
	int line;
	const char *key; /* NULL: no key (syntax errors) */
	const char *says;
} bad_configs[] = {
	{ "unknown top-level key",
	  "tiers:\n  - path: /a\nmaxbytes: 5\n", 3, "maxbytes", "unknown key" },
	{ "unknown tier key",
	  "tiers:\n  - path: /a\n    maxbytes: 1TB\n", 3, "maxbytes",
	  "unknown key" },
	{ "bad size",
	  "tiers:\n  - name: a\n    path: /a\n    max_bytes: 12XB\n", 4,
	  "max_bytes", "'12XB' is not a size (use an integer or a suffix" },
	{ "negative size",
	  "tiers:\n  - path: /a\n    max_bytes: -5GB\n", 3, "max_bytes",
	  "negative" },
	{ "fractional size",
	  "tiers:\n  - path: /a\n    max_bytes: 1.5GB\n", 3, "max_bytes",
	  "not a size" },
	{ "missing path",
	  "tiers:\n  - path: /a\n  - name: b\n    max_bytes: 1GB\n", 3, "path",
	  "missing" },
	{ "empty tiers", "verify: fill\ntiers: []\n", 2, "tiers", "empty" },
	{ "tiers missing", "# nothing\nverify: fill\n", 2, "tiers", "missing" },
	{ "empty file", "", 1, "tiers", "missing" },
	{ "no folder tier (R6)",
	  "tiers:\n  - type: s3\n    bucket: b\n", 2, "tiers",
	  "no folder-backed tier" },
	{ "bad type",
	  "tiers:\n  - path: /a\n    type: nfs\n", 3, "type",
	  "'nfs' is not a tier type" },
	{ "bad verify", "tiers: [{path: /a}]\nverify: sometimes\n", 2, "verify",
	  "fill, always or off" },
	{ "bad fuse_io_uring", "tiers: [{path: /a}]\nfuse_io_uring: maybe\n", 2,
	  "fuse_io_uring", "'maybe' is not a choice (use auto, on or off)" },
	{ "bad manifest_ttl", "tiers: [{path: /a}]\nmanifest_ttl: 1m\n", 2,
	  "manifest_ttl", "'1m'" },
	{ "negative manifest_ttl", "tiers: [{path: /a}]\nmanifest_ttl: -1\n", 2,
	  "manifest_ttl", "'-1'" },
	{ "duplicate tier name",
	  "tiers:\n  - name: a\n    path: /a\n  - name: a\n    path: /b\n", 4,
	  "name", "duplicate tier name 'a'" },
	{ "name clashes with a default name",
	  "tiers:\n  - path: /a\n  - name: folder0\n    path: /b\n", 3, "name",
	  "duplicate tier name 'folder0'" },
	{ "duplicate top-level key",
	  "tiers: [{path: /a}]\nverify: fill\nverify: off\n", 3, "verify",
	  "duplicate key (first given on line 2)" },
	{ "duplicate tier key",
	  "tiers:\n  - path: /a\n    max_bytes: 1GB\n    path: /b\n", 4, "path",
	  "duplicate key" },
	{ "key not valid for type",
	  "tiers:\n  - path: /a\n    bucket: b\n", 3, "bucket",
	  "not valid for a folder tier" },
	{ "path on a cloud tier",
	  "tiers:\n  - path: /a\n  - type: s3\n    bucket: b\n    path: /x\n", 5,
	  "path", "not valid for an s3 tier" },
	{ "unset variable",
	  "tiers:\n  - path: /a\n  - path: $DV_T_UNSET_VAR/b\n", 3, "path",
	  "not set" },
	{ "relative path", "tiers:\n  - path: shards\n", 2, "path",
	  "not an absolute path" },
	{ "tiers not a list", "tiers:\n  path: /a\n", 2, "tiers",
	  "expected a list" },
	{ "tier not a mapping", "tiers:\n  - path: /a\n  - /b\n", 3, "tiers",
	  "not a mapping" },
	{ "syntax: missing colon",
	  "tiers:\n  - name: a\n    path: /a\n    max_bytes 5\n  - path: /b\n",
	  4, NULL, "YAML syntax error" },
	{ "syntax: unterminated quote",
	  "tiers:\n  - path: /a\n    name: \"a\n", 3, NULL,
	  "YAML syntax error" },
	{ "syntax: tab indentation",
	  "tiers:\n  - name: a\n\tpath: /a\n", 3, NULL, "tab" },
	{ "syntax: bad indentation",
	  "tiers:\n  - path: /a\n   name: b\n", 3, NULL, "YAML syntax error" },
	{ "not UTF-8", "tiers:\n  - path: /a\n    name: \"caf\xff\"\n", 3, NULL,
	  "UTF-8" },
	{ "second document", "tiers: [{path: /a}]\n---\ntiers: []\n", 3, NULL,
	  "second YAML document" },
	{ "top level is a list", "- path: /a\n", 1, NULL, "expected a mapping" },
	{ "chunk_bytes not a multiple of 4096",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices: auto\n"
	  "    chunk_bytes: 5000\n",
	  5, "chunk_bytes", "multiple of 4096" },
	{ "chunk_bytes zero",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices: auto\n"
	  "    chunk_bytes: 0\n",
	  5, "chunk_bytes", "multiple of 4096" },
	{ "stripe without devices",
	  "tiers:\n  - path: /a\n  - type: stripe\n    format: true\n", 3,
	  "devices", "missing" },
	{ "stripe with an empty device list",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices: []\n", 4,
	  "devices", "empty" },
	{ "stripe devices neither list nor auto",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices: all\n", 4,
	  "devices", "'auto'" },
	{ "stripe device listed twice",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices:\n"
	  "      - /dev/sda\n      - /dev/sda\n",
	  6, "devices", "twice" },
	{ "format not a boolean",
	  "tiers:\n  - path: /a\n  - type: stripe\n    devices: auto\n"
	  "    format: maybe\n",
	  5, "format", "not a boolean" },
	{ "azure container_url not http(s)",
	  "tiers:\n  - path: /a\n  - type: azure_blob\n"
	  "    container_url: ftp://x/shards\n",
	  4, "container_url", "https://" },
	{ "azure without container_url",
	  "tiers:\n  - path: /a\n  - type: azure_blob\n    prefix: p\n", 3,
	  "container_url", "missing" },
	{ "s3 without bucket",
	  "tiers:\n  - path: /a\n  - type: s3\n    region: us-east-1\n", 3,
	  "bucket", "missing" },
	{ "gcs without bucket",
	  "tiers:\n  - path: /a\n  - type: gcs\n    project: p\n", 3, "bucket",
	  "missing" },
	{ "empty bucket", "tiers:\n  - path: /a\n  - type: s3\n    bucket: ''\n",
	  4, "bucket", "empty" },
	{ "endpoint not a URL",
	  "tiers:\n  - path: /a\n  - type: s3\n    bucket: b\n"
	  "    endpoint: localhost:9000\n",
	  5, "endpoint", "not a URL" },
	{ "bad metrics", "tiers: [{path: /a}]\nmetrics: 9110\n", 2, "metrics",
	  "ADDR:PORT" },
	{ "metrics port out of range",
	  "tiers: [{path: /a}]\nmetrics: 127.0.0.1:70000\n", 2, "metrics",
	  "ADDR:PORT" },
	{ "bad http.retries",
	  "tiers: [{path: /a}]\nhttp:\n  connect_timeout: 5\n  retries: many\n",
	  4, "http.retries", "'many'" },
	{ "http.retries too large",
	  "tiers: [{path: /a}]\nhttp:\n  retries: 1000\n", 3, "http.retries",
	  "from 0 to 100" },
	{ "unknown http key",
	  "tiers: [{path: /a}]\nhttp:\n  timeout: 5\n", 3, "http.timeout",
	  "unknown key" },
	{ "http not a mapping", "tiers: [{path: /a}]\nhttp: fast\n", 2, "http",
	  "expected a mapping" },
	{ "negative price", "tiers: [{path: /a}]\ndollars_per_gb: -0.09\n", 2,
	  "dollars_per_gb", "not a price" },
	{ "price not a number", "tiers: [{path: /a}]\ndollars_per_gb: nan\n", 2,
	  "dollars_per_gb", "not a price" },
	{ "bad origin", "origin: ftp://o\ntiers: [{path: /a}]\n", 1, "origin",
	  "not an origin" },
	{ "bad tier name", "tiers:\n  - name: my cache\n    path: /a\n", 2,
	  "name", "not a tier name" },
	{ "path is a list", "tiers:\n  - path: [/a, /b]\n", 2, "path",
	  "found a list" },
	{ "type is a mapping", "tiers:\n  - path: /a\n    type: {a: b}\n", 3,
	  "type", "found a mapping" },
	{ "NUL in a value", "tiers:\n  - path: \"/a\\0b\"\n", 2, "path",
	  "NUL" },
	{ "log_level is not a key", "log_level: debug\ntiers: [{path: /a}]\n", 1,
	  "log_level", "unknown key" },
};

#define NBAD (sizeof(bad_configs) / sizeof(bad_configs[0]))

START_TEST(test_bad_config)
{
	const struct bad_config *c = &bad_configs[_i];

	setenv("HOME", "/home/ada", 1);
	unsetenv("DV_T_UNSET_VAR");
	ck_assert_msg(c->line > 0, "%s", c->what);
	expect_error_at(c->yaml, c->line, c->key, c->says);
}
END_TEST

START_TEST(test_error_without_buffer)
{
	struct dv_config *cfg;

	ck_assert_int_eq(dv_config_parse("tiers: []\n", 10, FILE_NAME, &cfg,
					 NULL, 0),
			 -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_int_eq(dv_config_parse("tiers: []\n", 10, FILE_NAME, &cfg,
					 err, 0),
			 -EINVAL);
}
END_TEST

START_TEST(test_error_truncates_to_buffer)
{
	struct dv_config *cfg;
	char small[16];

	memset(small, 'x', sizeof(small));
	ck_assert_int_eq(dv_config_parse("tiers: []\n", 10, FILE_NAME, &cfg,
					 small, sizeof(small)),
			 -EINVAL);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

/* Secrets never appear in messages. */
START_TEST(test_secrets_not_in_errors)
{
	parse_bad("tiers:\n  - path: /a\n  - type: azure_blob\n"
		  "    container_url: https://a/c\n"
		  "    sas_token: sv=2024&sig=SECRET1\n"
		  "    bogus: 1\n");
	ck_assert_msg(!strstr(err, "SECRET1"), "%s", err);
	parse_bad("tiers:\n  - path: /a\n  - type: azure_blob\n"
		  "    container_url: htps://a/c?sig=SECRET2\n");
	ck_assert_msg(!strstr(err, "SECRET2"), "%s", err);
	parse_bad("tiers:\n  - path: /a\n  - type: azure_blob\n"
		  "    container_url: https://a/c\n"
		  "    sas_token: [SECRET3]\n");
	ck_assert_msg(!strstr(err, "SECRET3"), "%s", err);
}
END_TEST

/* Aliases point at one node: a reused tier is a duplicate, not a crash. */
START_TEST(test_yaml_aliases)
{
	expect_error_at("tiers:\n  - &t {name: a, path: /a}\n  - *t\n", 2,
			"name", "duplicate tier name");
}
END_TEST

START_TEST(test_names)
{
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_FOLDER), "folder");
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_RAM), "ram");
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_STRIPE), "stripe");
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_S3), "s3");
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_AZURE_BLOB),
			 "azure_blob");
	ck_assert_str_eq(dv_tier_type_name(DV_TIER_TYPE_GCS), "gcs");
	ck_assert_str_eq(dv_tier_type_name((enum dv_tier_type)42), "?");
	ck_assert_str_eq(dv_config_source_name(DV_CONFIG_EXPLICIT), "explicit");
	ck_assert_str_eq(dv_config_source_name(DV_CONFIG_SYSTEM), "system");
	ck_assert_str_eq(dv_config_source_name(DV_CONFIG_USER), "user");
	ck_assert_str_eq(dv_config_source_name(DV_CONFIG_DEFAULT), "default");
	ck_assert_str_eq(dv_verify_mode_name(DV_VERIFY_OFF), "off");
	ck_assert(dv_tier_type_is_folder(DV_TIER_TYPE_FOLDER));
	ck_assert(!dv_tier_type_is_folder(DV_TIER_TYPE_S3));
	ck_assert(!dv_tier_type_is_folder(DV_TIER_TYPE_AZURE_BLOB));
	ck_assert(!dv_tier_type_is_folder(DV_TIER_TYPE_GCS));
	dv_config_free(NULL);
}
END_TEST

/* Resolution (R10): files in a temporary tree. */

static char *tmp;
static char system_path[PATH_MAX];
static char user_path[PATH_MAX];
static char home[PATH_MAX / 2];
static struct dv_config_paths paths;

static const char system_yaml[] = "tiers:\n  - name: sys\n    path: /sys-tier\n";
static const char user_yaml[] = "tiers:\n  - name: usr\n    path: /usr-tier\n";
static const char explicit_yaml[] = "tiers:\n  - name: exp\n    path: /exp\n";

static void mkdir_p(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void put(const char *path, const char *text)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	mkdir_p(dir);
	dv_test_write_file(path, text, strlen(text));
}

static void resolve_setup(void)
{
	tmp = dv_test_tmpdir("config");
	snprintf(home, sizeof(home), "%s/home", tmp);
	snprintf(system_path, sizeof(system_path), "%s/etc/datavo/shards.yaml",
		 tmp);
	snprintf(user_path, sizeof(user_path),
		 "%s/.config/datavo/shards.yaml", home);
	mkdir_p(home);
	setenv("HOME", home, 1);
	unsetenv("DATAVO_SHARD_CACHE_DIR");
	paths.system_path = system_path;
	paths.user_path = user_path;
}

static void resolve_teardown(void)
{
	dv_test_rmtree(tmp);
	free(tmp);
	tmp = NULL;
}

static struct dv_config *resolve_ok(const char *explicit_path,
				    enum dv_config_source source,
				    const char *tier_name)
{
	struct dv_config *cfg = NULL;
	int ret;

	err[0] = '\0';
	ret = dv_config_resolve(explicit_path, &paths, &cfg, err, sizeof(err));
	ck_assert_msg(ret == 0, "resolve failed (%d): %s", ret, err);
	ck_assert_int_eq(cfg->source, source);
	ck_assert_str_eq(tier(cfg, 0)->name, tier_name);
	return cfg;
}

static int resolve_bad(const char *explicit_path)
{
	struct dv_config *cfg = (struct dv_config *)&err;
	int ret;

	err[0] = '\0';
	ret = dv_config_resolve(explicit_path, &paths, &cfg, err, sizeof(err));
	ck_assert_int_lt(ret, 0);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strchr(err, '\n') == NULL, "%s", err);
	return ret;
}

START_TEST(test_r10_explicit_wins)
{
	char explicit_path[PATH_MAX];
	struct dv_config *cfg;

	snprintf(explicit_path, sizeof(explicit_path), "%s/my.yaml", tmp);
	put(explicit_path, explicit_yaml);
	put(system_path, system_yaml);
	put(user_path, user_yaml);
	cfg = resolve_ok(explicit_path, DV_CONFIG_EXPLICIT, "exp");
	ck_assert_str_eq(cfg->path, explicit_path);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_explicit_missing_is_error)
{
	char explicit_path[PATH_MAX];

	snprintf(explicit_path, sizeof(explicit_path), "%s/nope.yaml", tmp);
	put(system_path, system_yaml);
	put(user_path, user_yaml);
	ck_assert_int_eq(resolve_bad(explicit_path), -ENOENT);
	ck_assert_msg(strstr(err, explicit_path), "%s", err);
}
END_TEST

START_TEST(test_r10_explicit_invalid_is_error)
{
	char explicit_path[PATH_MAX];

	snprintf(explicit_path, sizeof(explicit_path), "%s/bad.yaml", tmp);
	put(explicit_path, "tiers:\n  - path: /a\n    max_bytes: lots\n");
	put(system_path, system_yaml);
	ck_assert_int_eq(resolve_bad(explicit_path), -EINVAL);
	ck_assert_msg(strstr(err, ":3: key 'max_bytes'"), "%s", err);
	ck_assert_msg(strncmp(err, explicit_path, strlen(explicit_path)) == 0,
		      "%s", err);
}
END_TEST

START_TEST(test_r10_system_over_user)
{
	struct dv_config *cfg;

	put(system_path, system_yaml);
	put(user_path, user_yaml);
	cfg = resolve_ok(NULL, DV_CONFIG_SYSTEM, "sys");
	ck_assert_str_eq(cfg->path, system_path);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_system_alone)
{
	struct dv_config *cfg;

	put(system_path, system_yaml);
	cfg = resolve_ok(NULL, DV_CONFIG_SYSTEM, "sys");
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_user_without_system)
{
	struct dv_config *cfg;

	put(user_path, user_yaml);
	cfg = resolve_ok(NULL, DV_CONFIG_USER, "usr");
	ck_assert_str_eq(cfg->path, user_path);
	dv_config_free(cfg);
}
END_TEST

/* The real default user path is "~/.config/datavo/shards.yaml". */
START_TEST(test_r10_user_path_tilde)
{
	struct dv_config *cfg;

	put(user_path, user_yaml);
	paths.user_path = NULL;
	cfg = resolve_ok(NULL, DV_CONFIG_USER, "usr");
	ck_assert_str_eq(cfg->path, user_path);
	dv_config_free(cfg);
	paths.user_path = "~/.config/datavo/shards.yaml";
	cfg = resolve_ok(NULL, DV_CONFIG_USER, "usr");
	ck_assert_str_eq(cfg->path, user_path);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_default_cache_dir_env)
{
	char dir[PATH_MAX];
	struct dv_config *cfg;

	snprintf(dir, sizeof(dir), "%s/cache-here", tmp);
	setenv("DATAVO_SHARD_CACHE_DIR", dir, 1);
	cfg = resolve_ok(NULL, DV_CONFIG_DEFAULT, "default");
	ck_assert_ptr_null(cfg->path);
	ck_assert_uint_eq(cfg->ntiers, 1);
	ck_assert_int_eq(tier(cfg, 0)->type, DV_TIER_TYPE_FOLDER);
	ck_assert_str_eq(tier(cfg, 0)->path, dir);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, 50ULL << 30);
	ck_assert_uint_eq(tier(cfg, 0)->max_bytes, DV_DEFAULT_TIER_BYTES);
	ck_assert_int_eq(cfg->verify, DV_VERIFY_FILL);
	ck_assert_uint_eq(cfg->manifest_ttl, DV_DEFAULT_MANIFEST_TTL);
	ck_assert_uint_eq(cfg->http.retries, 4);
	/* Nothing is created: the tier makes its directory on first use. */
	ck_assert_int_eq(access(dir, F_OK), -1);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_default_home)
{
	char want[PATH_MAX];
	struct dv_config *cfg;

	snprintf(want, sizeof(want), "%s/.cache/altavo/datavo/shards", home);
	cfg = resolve_ok(NULL, DV_CONFIG_DEFAULT, "default");
	ck_assert_str_eq(tier(cfg, 0)->path, want);
	dv_config_free(cfg);
	/* An empty DATAVO_SHARD_CACHE_DIR is the same as an unset one. */
	setenv("DATAVO_SHARD_CACHE_DIR", "", 1);
	cfg = resolve_ok(NULL, DV_CONFIG_DEFAULT, "default");
	ck_assert_str_eq(tier(cfg, 0)->path, want);
	dv_config_free(cfg);
}
END_TEST

START_TEST(test_r10_default_direct)
{
	struct dv_config *cfg = NULL;

	setenv("DATAVO_SHARD_CACHE_DIR", "~/shards", 1);
	ck_assert_int_eq(dv_config_default(&cfg, err, sizeof(err)), 0);
	ck_assert_int_eq(cfg->source, DV_CONFIG_DEFAULT);
	ck_assert_str_eq(tier(cfg, 0)->name, "default");
	ck_assert_int_eq(tier(cfg, 0)->line, 0);
	ck_assert_uint_eq(strlen(tier(cfg, 0)->path), strlen(home) + 7);
	dv_config_free(cfg);
	setenv("DATAVO_SHARD_CACHE_DIR", "relative/dir", 1);
	ck_assert_int_eq(dv_config_default(&cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strstr(err, "DATAVO_SHARD_CACHE_DIR"), "%s", err);
}
END_TEST

START_TEST(test_r10_invalid_system_does_not_fall_through)
{
	put(system_path, "tiers:\n  - path: /a\n    colour: blue\n");
	put(user_path, user_yaml);
	ck_assert_int_eq(resolve_bad(NULL), -EINVAL);
	ck_assert_msg(strstr(err, system_path), "%s", err);
	ck_assert_msg(strstr(err, ":3: key 'colour'"), "%s", err);
}
END_TEST

START_TEST(test_r10_invalid_user_does_not_fall_through)
{
	put(user_path, "tiers:\n  - type: s3\n    bucket: b\n");
	ck_assert_int_eq(resolve_bad(NULL), -EINVAL);
	ck_assert_msg(strstr(err, user_path), "%s", err);
	ck_assert_msg(strstr(err, ":2: key 'tiers'"), "%s", err);
}
END_TEST

START_TEST(test_r10_present_without_tiers_is_error)
{
	put(system_path, "origin: https://o.example/datavo\n");
	put(user_path, user_yaml);
	ck_assert_int_eq(resolve_bad(NULL), -EINVAL);
	ck_assert_msg(strstr(err, system_path), "%s", err);
	ck_assert_msg(strstr(err, "key 'tiers'"), "%s", err);
	ck_assert_msg(strstr(err, "missing"), "%s", err);
}
END_TEST

START_TEST(test_r10_empty_file_is_error)
{
	put(user_path, "");
	ck_assert_int_eq(resolve_bad(NULL), -EINVAL);
	ck_assert_msg(strstr(err, user_path), "%s", err);
	ck_assert_msg(strstr(err, "key 'tiers'"), "%s", err);
}
END_TEST

START_TEST(test_r10_unreadable_file)
{
	put(system_path, system_yaml);
	ck_assert_int_eq(chmod(system_path, 0), 0);
	if (geteuid() == 0)
		return; /* root reads anything */
	ck_assert_int_eq(resolve_bad(NULL), -EACCES);
	ck_assert_msg(strstr(err, system_path), "%s", err);
}
END_TEST

START_TEST(test_r10_directory_is_error)
{
	mkdir_p(system_path);
	ck_assert_int_eq(resolve_bad(NULL), -EISDIR);
	ck_assert_msg(strstr(err, system_path), "%s", err);
}
END_TEST

START_TEST(test_load_file)
{
	char path[PATH_MAX];
	struct dv_config *cfg = NULL;

	snprintf(path, sizeof(path), "%s/f.yaml", tmp);
	put(path, user_yaml);
	ck_assert_int_eq(dv_config_load_file(path, &cfg, err, sizeof(err)), 0);
	ck_assert_str_eq(cfg->path, path);
	ck_assert_str_eq(tier(cfg, 0)->name, "usr");
	ck_assert_int_eq(tier(cfg, 0)->line, 2);
	dv_config_free(cfg);
	snprintf(path, sizeof(path), "%s/missing.yaml", tmp);
	ck_assert_int_eq(dv_config_load_file(path, &cfg, err, sizeof(err)),
			 -ENOENT);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strstr(err, path), "%s", err);
}
END_TEST

/* Collects the messages of dv_config_file_warnings(). */
struct warned {
	int n;
	char last[512];
};

static void collect(void *arg, const char *msg)
{
	struct warned *w = arg;

	w->n++;
	snprintf(w->last, sizeof(w->last), "%s", msg);
}

static struct warned file_warnings(const char *dir, const char *yaml,
				   mode_t mode)
{
	struct warned w = { 0 };
	struct dv_config *cfg;
	char path[4096];

	snprintf(path, sizeof(path), "%s/shards.yaml", dir);
	dv_test_write_file(path, yaml, strlen(yaml));
	ck_assert_int_eq(chmod(path, mode), 0);
	ck_assert_int_eq(dv_config_load_file(path, &cfg, err, sizeof(err)), 0);
	dv_config_file_warnings(cfg, collect, &w);
	dv_config_free(cfg);
	return w;
}

/* A config holding a secret that others can read is worth a warning. */
START_TEST(test_secret_file_mode)
{
	static const char sas[] =
		"tiers:\n  - path: /tmp/t\n  - type: azure_blob\n"
		"    container_url: https://a.blob.core.windows.net/c\n"
		"    sas_token: sv=1&sig=SECRET\n";
	static const char creds[] = "origin: https://u:p@h/\ntiers:\n  - path: /tmp/t\n";
	static const char plain[] = "origin: https://h/\ntiers:\n  - path: /tmp/t\n";
	char *dir = dv_test_tmpdir("cfgmode");
	struct warned w;

	w = file_warnings(dir, sas, 0644);
	ck_assert_int_eq(w.n, 1);
	ck_assert_ptr_nonnull(strstr(w.last, "holds a secret (sas_token) and is readable by everyone (mode 0644)"));
	ck_assert_ptr_null(strstr(w.last, "SECRET"));
	w = file_warnings(dir, sas, 0640);
	ck_assert_ptr_nonnull(strstr(w.last, "readable by its group"));
	ck_assert_int_eq(file_warnings(dir, sas, 0600).n, 0);
	w = file_warnings(dir, creds, 0644);
	ck_assert_ptr_nonnull(strstr(w.last, "holds a secret (origin credentials)"));
	ck_assert_int_eq(file_warnings(dir, plain, 0644).n, 0);
	w = file_warnings(dir, plain, 0666);
	ck_assert_ptr_nonnull(strstr(w.last, "writable by everyone"));
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");
	TCase *tr = tcase_create("resolve");

	tcase_add_test(tc, test_seed_schema_example);
	tcase_add_test(tc, test_seed_schema_optional_fields);
	tcase_add_test(tc, test_seed_gpu_workstation);
	tcase_add_test(tc, test_seed_cloud_azure);
	tcase_add_test(tc, test_seed_cloud_aws);
	tcase_add_test(tc, test_seed_cloud_gcp);
	tcase_add_test(tc, test_json_flow_style);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_every_top_level_key);
	tcase_add_test(tc, test_verify_modes_and_origins);
	tcase_add_test(tc, test_fuse_io_uring);
	tcase_add_test(tc, test_metrics_forms);
	tcase_add_test(tc, test_null_values_are_absent);
	tcase_add_test(tc, test_sizes_in_max_bytes);
	tcase_add_test(tc, test_sizes_rejected);
	tcase_add_test(tc, test_tier_mode_and_group);
	tcase_add_test(tc, test_tier_mode_and_group_rejected);
	tcase_add_test(tc, test_tier_default_names);
	tcase_add_test(tc, test_ram_defaults);
	tcase_add_test(tc, test_stripe_tier);
	tcase_add_test(tc, test_r12_expand);
	tcase_add_test(tc, test_r12_unset_var_names_key);
	tcase_add_test(tc, test_r11_root_warns);
	tcase_add_test(tc, test_r11_root_warns_even_empty);
	tcase_add_test(tc, test_r6_needs_folder);
	tcase_add_loop_test(tc, test_bad_config, 0, (int)NBAD);
	tcase_add_test(tc, test_error_without_buffer);
	tcase_add_test(tc, test_error_truncates_to_buffer);
	tcase_add_test(tc, test_secrets_not_in_errors);
	tcase_add_test(tc, test_yaml_aliases);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_secret_file_mode);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tr, resolve_setup, resolve_teardown);
	tcase_add_test(tr, test_r10_explicit_wins);
	tcase_add_test(tr, test_r10_explicit_missing_is_error);
	tcase_add_test(tr, test_r10_explicit_invalid_is_error);
	tcase_add_test(tr, test_r10_system_over_user);
	tcase_add_test(tr, test_r10_system_alone);
	tcase_add_test(tr, test_r10_user_without_system);
	tcase_add_test(tr, test_r10_user_path_tilde);
	tcase_add_test(tr, test_r10_default_cache_dir_env);
	tcase_add_test(tr, test_r10_default_home);
	tcase_add_test(tr, test_r10_default_direct);
	tcase_add_test(tr, test_r10_invalid_system_does_not_fall_through);
	tcase_add_test(tr, test_r10_invalid_user_does_not_fall_through);
	tcase_add_test(tr, test_r10_present_without_tiers_is_error);
	tcase_add_test(tr, test_r10_empty_file_is_error);
	tcase_add_test(tr, test_r10_unreadable_file);
	tcase_add_test(tr, test_r10_directory_is_error);
	tcase_add_test(tr, test_load_file);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	return dv_test_run(config_suite());
}
