/*
 * Inside the AWS credential chain: shared by aws_creds.c (the chain, the
 * environment and the shared files) and aws_creds_remote.c (STS web
 * identity, ECS, IMDS). Nothing else includes this.
 */
#ifndef DV_AWS_CREDS_IMPL_H
#define DV_AWS_CREDS_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include "aws_creds.h"
#include "tiers/net/http.h"

#define DV_AWS_ECS_HOST "169.254.170.2"
#define DV_AWS_IMDS_ENDPOINT "http://169.254.169.254"

struct dv_aws_chain {
	pthread_mutex_t lock;
	struct dv_http sts_http;    /* the configured timeouts */
	struct dv_http meta_http;   /* short ones: ECS agent, IMDS */
	time_t (*now)(void);
	char *ecs_host;             /* NULL: DV_AWS_ECS_HOST */

	struct dv_http_denied denied; /* rate of "access denied" lines */

	/* protected by lock */
	struct dv_aws_creds cached;
	bool have;
	time_t refresh_at;          /* dv_http_refresh_at(); 0: never */
	time_t failed_at;           /* last failed resolution */
	int failed_err;             /* its error while nothing is cached */
};

/*
 * The sources after the shared files. Each fills @out and returns 0,
 * -ENOENT when it is not configured or has nothing (the chain goes on),
 * or another -errno that stops the chain. Each logs its own failures.
 */
int dv_aws_from_web_identity(struct dv_aws_chain *c, struct dv_aws_creds *out);
int dv_aws_from_ecs(struct dv_aws_chain *c, struct dv_aws_creds *out);
int dv_aws_from_imds(struct dv_aws_chain *c, struct dv_aws_creds *out);

/* Copies @src into @dst (@cap bytes); -EPROTO when it does not fit. */
int dv_aws_copy(char *dst, size_t cap, const char *src, size_t len);

/* An ISO 8601 UTC time ("2024-01-02T03:04:05Z", fraction and offset
 * allowed) as time_t. 0 or -EINVAL. */
int dv_aws_parse_time(const char *s, time_t *out);


#endif
