/* notify — see notify.h. */
#include "notify.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

int sbx_notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n;
	socklen_t len;
	int fd, rc = 0;

	if (!path || !*path)
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static void *wait_mounted(void *arg)
{
	char *probe = arg, msg[600];
	struct stat st;
	struct timespec pause = {0, 50 * 1000000L};
	int rc = -ETIMEDOUT;

	for (int i = 0; i < 2400; i++) { /* 120 s */
		if (stat(probe, &st) == 0) {
			rc = 0;
			break;
		}
		nanosleep(&pause, NULL);
	}
	if (rc) {
		sbx_log(SBX_LOG_ERR, "systemd: %s did not answer within 120 s; not ready", probe);
	} else {
		snprintf(msg, sizeof(msg), "READY=1\nSTATUS=mounted (%s answers)\nMAINPID=%d",
			 probe, (int)getpid());
		rc = sbx_notify_send(msg);
		if (rc)
			sbx_log(SBX_LOG_WARN, "systemd: notify: %s", strerror(-rc));
		else
			sbx_log(SBX_LOG_INFO, "systemd: ready");
	}
	free(probe);
	return NULL;
}

int sbx_notify_when_mounted(const char *mountpoint)
{
	const char *ns = getenv("NOTIFY_SOCKET");
	pthread_t t;
	char *probe;

	if (!ns || !*ns)
		return 0;
	if (asprintf(&probe, "%s/README", mountpoint) < 0)
		return -ENOMEM;
	if (pthread_create(&t, NULL, wait_mounted, probe)) {
		free(probe);
		return -EAGAIN;
	}
	pthread_detach(t);
	return 0;
}
