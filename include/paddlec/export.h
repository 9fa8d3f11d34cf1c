/* PD_API marks what libpaddlec.so exports.
 *
 * The library is compiled with -fvisibility=hidden, so a function or
 * variable is visible to programs linking the shared library only when its
 * declaration in include/paddlec/ carries PD_API:
 *
 *   PD_API pd_tensor *pd_add(pd_tensor *x, pd_tensor *y);
 *
 * Everything else (kernels, the op registry, helpers shared between the
 * library's files) stays internal: it cannot collide with a program's own
 * symbols and is no part of the ABI. Every public declaration needs PD_API;
 * the abi_symbols test fails when the library's exported symbols and the
 * functions declared in include/ differ (docs/architecture.md). */
#ifndef PADDLEC_EXPORT_H
#define PADDLEC_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define PD_API __attribute__((visibility("default")))
#else
#define PD_API
#endif

#endif
