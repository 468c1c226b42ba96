/* vk_test.h — the Vulkan backend as the tests create it. Under
 * LeakSanitizer, what the driver allocates while it compiles our
 * pipelines is not ours to free (Mesa's lavapipe keeps blocks from its
 * JIT for the life of the process), so leak tracking pauses for the
 * constructor alone; everything cmf allocates later is tracked as usual.
 * vk_test_backend_try: the same, or NULL with a SKIPPED line. */
#ifndef CMF_TESTS_VK_TEST_H
#define CMF_TESTS_VK_TEST_H

#ifdef CMF_HAVE_VULKAN
#include "compute/vulkan/vk_backend.h"
#if defined(__SANITIZE_ADDRESS__)
#define CMF_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CMF_TEST_LSAN 1
#endif
#endif
#ifdef CMF_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

static inline cmf__backend *vk_test_backend_new(void)
{
#ifdef CMF_TEST_LSAN
    __lsan_disable();
#endif
    cmf__backend *be = cmf__vk_backend_new();
#ifdef CMF_TEST_LSAN
    __lsan_enable();
#endif
    return be;
}
#endif

#include "compute/backend.h"
#include <stdbool.h>
#include <stdio.h>

/* The Vulkan backend as one more backend of a test: NULL, said once and
 * loudly as SKIPPED, when the build or the machine has none. */
static inline cmf__backend *vk_test_backend_try(void)
{
    static bool said;
#ifdef CMF_HAVE_VULKAN
    cmf__backend *be = vk_test_backend_new();
    if (!be && !said) printf("*** no Vulkan device (%s): Vulkan cases SKIPPED ***\n", cmf_last_error());
    if (be && !said) printf("  %s\n", be->ops->device(be));
#else
    cmf__backend *be = NULL;
    if (!said) printf("*** this build has no Vulkan backend: Vulkan cases SKIPPED ***\n");
#endif
    said = true;
    return be;
}

#endif
