/* init_seccomp — the seccomp filter of a local lease (see init_seccomp.c). */
#ifndef LCL_INIT_SECCOMP_H
#define LCL_INIT_SECCOMP_H

/* Sets no_new_privs and installs the filter on the caller (inherited by its
 * children). 0 or -errno. */
int lcl_seccomp_install(void);

#endif
