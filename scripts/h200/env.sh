# Sourced at the start of a command on the GPU machine: the Vulkan loader and the carried Dawn.
for f in .carry/deb/*.deb; do dpkg -x "$f" /; done
ldconfig
export WGTRAIN_DAWN_LIBRARY="$PWD/.carry/libwebgpu_wrapper.so"
if [ -z "$(ldconfig -p | grep libvulkan.so.1)" ]; then echo "no Vulkan loader" >&2; fi
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
true
