/* vk_loader.h — the Vulkan entry points the backend calls, resolved at run
 * time from the system loader (libvulkan.so.1) through its
 * vkGetInstanceProcAddr, once per process, with the one instance every
 * backend shares (device-level ones too: the loader's dispatching entry
 * points serve every device of that instance). Each is a file-local
 * pointer of vk_backend.c named `vkX` (static: nothing Vulkan is exported
 * from libcmf, so a program may link its own loader or volk beside it).
 * The X-macro lists keep the declarations and the lookups in one place. */
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

#endif
