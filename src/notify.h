/*
 * notify — systemd readiness (Type=notify) without libsystemd.
 *
 * The sd_notify(3) protocol is one datagram on the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace). sbxfs says
 * READY=1 only once its mount answers: a thread stats MOUNTPOINT/README,
 * which goes through the kernel to our own FUSE loop. Without
 * $NOTIFY_SOCKET nothing happens.
 */
#ifndef SBX_NOTIFY_H
#define SBX_NOTIFY_H

/* Sends one sd_notify message (e.g. "READY=1"). 0, or -errno; 0 when not under systemd. */
int sbx_notify_send(const char *msg);
/*
 * Starts a detached thread that waits (up to 120 s) until mountpoint/README
 * answers, then sends READY=1 with a STATUS line. No-op without
 * $NOTIFY_SOCKET. 0 or -errno.
 */
int sbx_notify_when_mounted(const char *mountpoint);

#endif
