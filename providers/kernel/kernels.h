/*
 * kernel/kernels — the code interpreters' drivers, embedded into the
 * binary at build time (kernel.am runs embed.sh over the sources):
 *   sbx_kernel_py   pykernel.py
 *   sbx_kernel_js   tsstrip.js followed by jskernel.js (one script)
 * Providers write them into a sandbox and start them there; see the top
 * of pykernel.py for their modes and protocol.
 */
#ifndef SBX_KERNEL_KERNELS_H
#define SBX_KERNEL_KERNELS_H

#include <stddef.h>

extern const char sbx_kernel_py[];
extern const size_t sbx_kernel_py_len;
extern const char sbx_kernel_js[];
extern const size_t sbx_kernel_js_len;

#endif
