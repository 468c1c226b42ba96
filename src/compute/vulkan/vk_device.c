/* vk_device.c — the Vulkan loader and the device: libvulkan opened and
 * every entry point looked up once per process (vk_loader.h), the device a
 * backend runs on picked (memory types, subgroups, NV cooperative
 * matrices) and the probe that describes it without creating it. No
 * VkDevice is made here (vk_backend.c makes it); the entry points are
 * written before any backend exists and only read after. */
#include "compute/vulkan/vk_be.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#ifdef __linux__
#include <sys/auxv.h>
#endif

/* the entry points (vk_loader.h), defined once for the backend's files */
#define VK_PTR(f) PFN_##f f __asm__("cmf__vk_" #f);
CMF_VK_GLOBAL(VK_PTR)
CMF_VK_INSTANCE(VK_PTR)
CMF_VK_DEVICE(VK_PTR)
#undef VK_PTR
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
/* optional: NULL where the loader or driver lacks VK_NV_cooperative_matrix */
static PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV vkGetPhysicalDeviceCooperativeMatrixPropertiesNV;

cmf_status cmf__vk_fail(VkResult r, const char *what)
{
    return cmf__error(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ? CMF_ERR_NOMEM
                                                                                            : CMF_ERR_BACKEND,
                      "vulkan: %s failed (VkResult %d)", what, (int)r);
}

static bool has_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

/* Which tensor-core GEMM to take (1 + its cmf__vk_coop entry; 0 none): the default
 * (CMF_VK_COOP unset or 1), the second (2) or none (0), where pd can run
 * it: VK_NV_cooperative_matrix with f16 x f16 + f32 -> f32 at 16 x 16 x
 * 16 in a subgroup, subgroups of 32, and the features it needs
 * (cooperativeMatrix, shaderFloat16, vulkanMemoryModel). */
static int coop_usable(VkPhysicalDevice pd, uint32_t subgroup_size)
{
    const char *want = getenv("CMF_VK_COOP");
    int v = !want || !want[0] ? 1 : want[0] >= '1' && want[0] < '1' + N_COOP && !want[1] ? want[0] - '0' : 0;
    if (!v || subgroup_size != 32 || !vkGetPhysicalDeviceCooperativeMatrixPropertiesNV ||
        !has_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
        return false;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, NULL,
                                                      VK_FALSE, VK_FALSE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &cm};
    VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f12, {0}};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!cm.cooperativeMatrix || !f12.shaderFloat16 || !f12.vulkanMemoryModel) return false;
    uint32_t n = 0;
    if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, NULL) != VK_SUCCESS || !n) return false;
    VkCooperativeMatrixPropertiesNV *props = calloc(n, sizeof *props);
    bool found = false;
    if (props) {
        for (uint32_t i = 0; i < n; i++) props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
        if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, props) == VK_SUCCESS)
            for (uint32_t i = 0; i < n && !found; i++) {
                const VkCooperativeMatrixPropertiesNV *c = &props[i];
                found = c->MSize == 16 && c->NSize == 16 && c->KSize == 16 && c->AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                        c->BType == VK_COMPONENT_TYPE_FLOAT16_NV && c->CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                        c->DType == VK_COMPONENT_TYPE_FLOAT32_NV && c->scope == VK_SCOPE_SUBGROUP_NV;
            }
    }
    free(props);
    return found ? v : 0;
}


/* Picks the device: CMF_VK_DEVICE=<index> when set, else the first discrete
 * GPU, else the first with a compute queue and push descriptors. */
static cmf_status pick_device(vk_be *be)
{
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(be->inst, &n, NULL);
    if (!n) return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: no device (install a driver; for tests, Mesa's lavapipe)");
    VkPhysicalDevice pds[16];
    if (n > 16) n = 16;
    vkEnumeratePhysicalDevices(be->inst, &n, pds);
    const char *want = getenv("CMF_VK_DEVICE");
    if (want && !*want) want = NULL;
    if (want) { /* an index among the n devices: say which exist rather than "no device" */
        char *end;
        long wi = strtol(want, &end, 10);
        if (end == want || *end || wi < 0 || wi >= (long)n)
            return cmf__error(CMF_ERR_UNSUPPORTED,
                              "vulkan: CMF_VK_DEVICE=%s: no such device index; %u Vulkan device%s (%s%u)", want, n,
                              n == 1 ? " exists" : "s exist", n == 1 ? "index " : "indices 0..", n - 1);
    }
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties pr;
        vkGetPhysicalDeviceProperties(pds[i], &pr);
        if (pr.apiVersion < VK_API_VERSION_1_2 || !has_ext(pds[i], VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) continue;
        int score = pr.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 3
                    : pr.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 2 : 1;
        if (want) score = atoi(want) == (int)i ? 10 : 0;
        if (score > best_score) best = (int)i, best_score = score;
    }
    if (best < 0 || best_score == 0)
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: no device with Vulkan 1.2 and push descriptors%s",
                          want ? " at the CMF_VK_DEVICE index" : "");
    be->pd = pds[best];
    VkPhysicalDeviceProperties pr;
    vkGetPhysicalDeviceProperties(be->pd, &pr);
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(be->pd, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(be->pd, &nq, qf);
    be->qfam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && be->qfam == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) be->qfam = i;
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(be->pd, &mp);
    /* host-visible coherent memory; on the device itself when a large heap
     * of it exists (resizable BAR), else in system memory */
    be->mem_type = UINT32_MAX;
    const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int mem_score = -1;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        const VkMemoryType *mt = &mp.memoryTypes[i];
        if ((mt->propertyFlags & need) != need) continue;
        bool local = mt->propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        int score = local && mp.memoryHeaps[mt->heapIndex].size >= ((VkDeviceSize)4 << 30) ? 2 : local ? 0 : 1;
        if (score > mem_score) mem_score = score, be->mem_type = i;
    }
    /* the staging buffer: host-cached system memory where there is some.
     * The CPU reads logits back through it, and a read from a
     * device-local, host-visible (resizable BAR) mapping is uncached: on
     * an H200 it took ~35 ms for one 600 KB row of logits. */
    be->stage_type = be->mem_type;
    int stage_score = -1;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
        if ((f & need) != need) continue;
        int score = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT ? 2 : 0) + (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ? 0 : 1);
        if (score > stage_score) stage_score = score, be->stage_type = i;
    }
    /* weights: device-local memory (the largest heap of it), uploaded through staging */
    be->local_type = be->mem_type;
    VkDeviceSize local_heap = 0;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        const VkMemoryType *mt = &mp.memoryTypes[i];
        if ((mt->propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && mp.memoryHeaps[mt->heapIndex].size > local_heap &&
            !(mt->propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
            local_heap = mp.memoryHeaps[mt->heapIndex].size, be->local_type = i;
    }
    be->local_bytes = mp.memoryHeaps[mp.memoryTypes[be->local_type].heapIndex].size;
    be->software = pr.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    be->align = pr.limits.minStorageBufferOffsetAlignment ? pr.limits.minStorageBufferOffsetAlignment : 256;
    const char *prof = getenv("CMF_VK_PROFILE");
    be->prof = prof && *prof && strcmp(prof, "0") && pr.limits.timestampComputeAndGraphics;
    be->ts_period = pr.limits.timestampPeriod;
    be->max_range = pr.limits.maxStorageBufferRange / 4 * 4;
    VkPhysicalDeviceSubgroupProperties sg = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, NULL, 0, 0, 0, 0};
    VkPhysicalDeviceDriverProperties drv = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, &sg, 0, "", "", {0}};
    VkPhysicalDeviceProperties2 pr2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &drv, {0}};
    vkGetPhysicalDeviceProperties2(be->pd, &pr2);
    const char *no_sg = getenv("CMF_VK_NO_SUBGROUP");
    be->subgroups = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                    (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) && sg.subgroupSize >= 1 &&
                    !(no_sg && !strcmp(no_sg, "1"));
    be->matvec = be->subgroups && sg.subgroupSize >= 4 && sg.subgroupSize <= 128; /* at most 32 subgroups of 128 */
    be->coop = coop_usable(be->pd, sg.subgroupSize);
    snprintf(be->name, sizeof be->name, "vulkan: %s (Vulkan %u.%u; driver %s %s; %.1f GiB device memory)", pr.deviceName,
             VK_API_VERSION_MAJOR(pr.apiVersion), VK_API_VERSION_MINOR(pr.apiVersion), drv.driverName[0] ? drv.driverName : "?",
             drv.driverInfo, (double)be->local_bytes / (1u << 30));
    if (be->qfam == UINT32_MAX || be->mem_type == UINT32_MAX)
        return cmf__error(CMF_ERR_UNSUPPORTED, "vulkan: %s has no compute queue or host-visible memory", be->name);
    return CMF_OK;
}

/* The loader, once per process: dlopen of libvulkan, the global entry
 * points, one instance every backend and the probe share, and every
 * instance- and device-level entry point looked up through that instance
 * (the loader's dispatching entry points, valid for every device of it).
 * The pointers are written here alone, before any backend exists, and
 * only read after: backends on several threads never rewrite them. */
static struct {
    bool ok;
    VkInstance inst;
    char err[512];
} g_vk;

static bool load_fail(const char *fmt, const char *name)
{
    snprintf(g_vk.err, sizeof g_vk.err, fmt, name);
    return false;
}

static bool load_entries(void)
{
    /* A statically linked program has no dynamic loader (AT_BASE 0): glibc's
     * dlopen there can map the Vulkan loader, but the drivers it opens then
     * crash inside vkCreateInstance. Such a program runs on the CPU. */
#ifdef __linux__
    if (getauxval(AT_BASE) == 0)
        return load_fail("vulkan: this program is statically linked, and the Vulkan loader needs a dynamically linked one%s", "");
#endif
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return load_fail("vulkan: no Vulkan 1.2 loader (libvulkan.so.1) on this system%s", "");
    *(void **)&vkGetInstanceProcAddr = dlsym(lib, "vkGetInstanceProcAddr");
    if (!vkGetInstanceProcAddr) return load_fail("vulkan: the loader has no %s", "vkGetInstanceProcAddr");
#define VK_GLOBAL(f) *(void **)&f = (void *)vkGetInstanceProcAddr(VK_NULL_HANDLE, #f);
    CMF_VK_GLOBAL(VK_GLOBAL)
    uint32_t version = 0;
    if (!vkCreateInstance || (vkEnumerateInstanceVersion && vkEnumerateInstanceVersion(&version) != VK_SUCCESS) ||
        version < VK_API_VERSION_1_2)
        return load_fail("vulkan: no Vulkan 1.2 loader (libvulkan.so.1) on this system%s", "");
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "cmf", 1, "cmf", 1, VK_API_VERSION_1_2};
    VkInstanceCreateInfo ii = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
    VkResult r = vkCreateInstance(&ii, NULL, &g_vk.inst);
    if (r != VK_SUCCESS) {
        snprintf(g_vk.err, sizeof g_vk.err, "vulkan: vkCreateInstance failed (VkResult %d)", (int)r);
        return false;
    }
#define VK_LOOKUP(f)                                                                                                 \
    if (!(*(void **)&f = (void *)vkGetInstanceProcAddr(g_vk.inst, #f))) return load_fail("vulkan: the loader has no %s", #f);
    CMF_VK_INSTANCE(VK_LOOKUP)
    CMF_VK_DEVICE(VK_LOOKUP)
#undef VK_LOOKUP
    *(void **)&vkGetPhysicalDeviceCooperativeMatrixPropertiesNV =
        (void *)vkGetInstanceProcAddr(g_vk.inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    return true;
}

static void load_once(void) { g_vk.ok = load_entries(); }

vk_be *cmf__vk_open(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_once);
    if (!g_vk.ok) {
        cmf__error(CMF_ERR_UNSUPPORTED, "%s", g_vk.err);
        return NULL;
    }
    vk_be *be = calloc(1, sizeof *be);
    if (!be) {
        cmf__error(CMF_ERR_NOMEM, "vulkan: out of memory");
        return NULL;
    }
    pthread_mutex_init(&be->mu, NULL);
    be->inst = g_vk.inst;
    if (pick_device(be)) {
        cmf__vk_free(&be->base);
        return NULL;
    }
    return be;
}

/* The probe's answer, once per process (the devices do not change under it). */
static struct {
    pthread_mutex_t mu;
    bool done;
    cmf_status st;
    char err[1024];
    cmf__gpu_info info;
} g_probe = {PTHREAD_MUTEX_INITIALIZER, false, CMF_OK, "", {"", 0, false}};

cmf_status cmf__vk_probe(cmf__gpu_info *out)
{
    pthread_mutex_lock(&g_probe.mu);
    if (!g_probe.done) {
        LSAN_PAUSE();
        vk_be *be = cmf__vk_open();
        if (be) {
            snprintf(g_probe.info.name, sizeof g_probe.info.name, "%s", be->name);
            g_probe.info.memory = be->local_bytes;
            g_probe.info.software = be->software;
            cmf__vk_free(&be->base);
        } else {
            g_probe.st = CMF_ERR_UNSUPPORTED;
            snprintf(g_probe.err, sizeof g_probe.err, "%s", cmf_last_error());
        }
        LSAN_RESUME();
        g_probe.done = true;
    }
    *out = g_probe.info;
    cmf_status st = g_probe.st ? cmf__error(g_probe.st, "%s", g_probe.err) : CMF_OK;
    pthread_mutex_unlock(&g_probe.mu);
    return st;
}
