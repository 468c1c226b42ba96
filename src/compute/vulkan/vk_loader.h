/* vk_loader.h — the Vulkan entry points the backend calls, resolved at run
 * time from the system loader (libvulkan.so.1) through its
 * vkGetInstanceProcAddr, once per process, with the one instance every
 * backend shares (device-level ones too: the loader's dispatching entry
 * points serve every device of that instance). vk_device.c defines them
 * and writes them before any backend exists; the backend's other files only
 * call them. Each is named `vkX` in the code and `cmf__vk_vkX` to the
 * linker (an asm label): libcmf.so exports none (hidden, like all of
 * libcmf's private names) and libcmf.a's carry the library's prefix, so a
 * program may link its own loader or volk beside it. The X-macro lists
 * keep the declarations and the lookups in one place. */
#ifndef CMF_COMPUTE_VULKAN_VK_LOADER_H
#define CMF_COMPUTE_VULKAN_VK_LOADER_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

/* resolved with a NULL instance */
#define CMF_VK_GLOBAL(X) X(vkCreateInstance) X(vkEnumerateInstanceVersion)
/* resolved with the instance */
#define CMF_VK_INSTANCE(X)                                                                                            \
    X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                              \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)                               \
    X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetPhysicalDeviceProperties2) \
    X(vkGetPhysicalDeviceFeatures2)
/* device-level, resolved with the instance */
#define CMF_VK_DEVICE(X)                                                                                              \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer) X(vkDestroyBuffer)                  \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory)        \
    X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers)                      \
    X(vkResetCommandBuffer) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCreateFence) X(vkDestroyFence)         \
    X(vkResetFences) X(vkWaitForFences) X(vkQueueSubmit) X(vkCreateDescriptorSetLayout)                              \
    X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateShaderModule)     \
    X(vkDestroyShaderModule) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCmdBindPipeline)                   \
    X(vkCmdPushDescriptorSetKHR) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier)                  \
    X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool)       \
    X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

#define CMF_VK_EXTERN(f) extern PFN_##f f __asm__("cmf__vk_" #f);
CMF_VK_GLOBAL(CMF_VK_EXTERN)
CMF_VK_INSTANCE(CMF_VK_EXTERN)
CMF_VK_DEVICE(CMF_VK_EXTERN)
#undef CMF_VK_EXTERN

#endif
