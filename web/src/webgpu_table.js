// The JavaScript half of the browser's WebGPU table (web/src/webgpu_table.cpp is the C++ half): each import below
// does one WebGPU call on navigator.gpu with plain numbers and strings. Objects live in a handle table (0: none).
// Asynchronous calls settle into an event list that InstanceProcessEvents drains; wgtrain_js_wait_events is the
// one import that suspends the module (ASYNCIFY) until such an event exists.
mergeInto(LibraryManager.library, {
  $WGT__deps: ['malloc', 'free'],
  $WGT: {
    objects: [null],
    free_ids: [],
    events: [],
    wake: null,
    // The WGPULimits fields, in webgpu_table.cpp's order (WGTRAIN_BROWSER_LIMITS).
    limit_names: [
      'maxTextureDimension1D', 'maxTextureDimension2D', 'maxTextureDimension3D', 'maxTextureArrayLayers',
      'maxBindGroups', 'maxBindGroupsPlusVertexBuffers', 'maxBindingsPerBindGroup',
      'maxDynamicUniformBuffersPerPipelineLayout', 'maxDynamicStorageBuffersPerPipelineLayout',
      'maxSampledTexturesPerShaderStage', 'maxSamplersPerShaderStage', 'maxStorageBuffersPerShaderStage',
      'maxStorageTexturesPerShaderStage', 'maxUniformBuffersPerShaderStage', 'maxUniformBufferBindingSize',
      'maxStorageBufferBindingSize', 'minUniformBufferOffsetAlignment', 'minStorageBufferOffsetAlignment',
      'maxVertexBuffers', 'maxBufferSize', 'maxVertexAttributes', 'maxVertexBufferArrayStride',
      'maxInterStageShaderVariables', 'maxColorAttachments', 'maxColorAttachmentBytesPerSample',
      'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX',
      'maxComputeWorkgroupSizeY', 'maxComputeWorkgroupSizeZ', 'maxComputeWorkgroupsPerDimension',
    ],
    // WGPUFeatureName values of src/gpu/webgpu_abi.h, by the browser's names.
    features: {
      'timestamp-query': 0x9,
      'shader-f16': 0xB,
      'subgroups': 0x12,
      'chromium-experimental-subgroup-matrix': 0x50034,
    },
    add: function(o) {
      if (o === null || o === undefined) return 0;
      var id = WGT.free_ids.length ? WGT.free_ids.pop() : WGT.objects.length;
      WGT.objects[id] = o;
      return id;
    },
    get: function(id) { return id ? WGT.objects[id] : undefined; },
    release: function(id) {
      if (!id || !WGT.objects[id]) return;
      WGT.objects[id] = null;
      WGT.free_ids.push(id);
    },
    str: function(ptr) { return ptr ? UTF8ToString(ptr) : ''; },
    cstr: function(s) {
      if (s === null || s === undefined) return 0;
      s = String(s);
      var n = lengthBytesUTF8(s) + 1;
      var p = _malloc(n);
      stringToUTF8(s, p, n);
      return p;
    },
    // WGPUErrorType of a GPUError (or null: no error).
    error_type: function(e) {
      if (!e) return 1;
      if (typeof GPUValidationError !== 'undefined' && e instanceof GPUValidationError) return 2;
      if (typeof GPUOutOfMemoryError !== 'undefined' && e instanceof GPUOutOfMemoryError) return 3;
      if (typeof GPUInternalError !== 'undefined' && e instanceof GPUInternalError) return 4;
      return 5;
    },
    settle: function(token, status, handle, type, message) {
      WGT.events.push({token: token, status: status, handle: handle, type: type, message: message});
      if (WGT.wake) {
        var w = WGT.wake;
        WGT.wake = null;
        w();
      }
    },
    // What the adapter is: a CPU rasteriser (SwiftShader, lavapipe, llvmpipe) or not.
    software: function(adapter) {
      var i = adapter.info || {};
      if (i.isFallbackAdapter || adapter.isFallbackAdapter) return true;
      var s = [i.vendor, i.architecture, i.device, i.description].join(' ').toLowerCase();
      return /swiftshader|llvmpipe|lavapipe/.test(s);
    },
  },

  wgtrain_js_create_instance__deps: ['$WGT'],
  wgtrain_js_create_instance: function() {
    if (typeof navigator === 'undefined' || !navigator.gpu) return 0;
    return WGT.add({gpu: navigator.gpu});
  },

  wgtrain_js_release__deps: ['$WGT'],
  wgtrain_js_release: function(id) { WGT.release(id); },

  wgtrain_js_request_adapter__deps: ['$WGT'],
  wgtrain_js_request_adapter: function(level, power, token) {
    var opts = {};
    // Compatibility: the adapter may be a compatibility-mode one (ANGLE on OpenGL ES), or a core one.
    if (level === 1) opts.featureLevel = 'compatibility';
    if (power === 2) opts.powerPreference = 'high-performance';
    if (power === 1) opts.powerPreference = 'low-power';
    if (typeof navigator === 'undefined' || !navigator.gpu) {
      WGT.settle(token, 2, 0, 0, 'this browser has no WebGPU (navigator.gpu is undefined)');
      return;
    }
    navigator.gpu.requestAdapter(opts).then(function(a) {
      if (!a) WGT.settle(token, 2, 0, 0, 'the browser offered no WebGPU adapter');
      else WGT.settle(token, 1, WGT.add(a), 0, null);
    }, function(e) { WGT.settle(token, 3, 0, 0, String(e && e.message || e)); });
  },

  wgtrain_js_adapter_info__deps: ['$WGT'],
  wgtrain_js_adapter_info: function(id, strings, numbers) {
    var a = WGT.get(id);
    var i = a.info || {};
    // Browsers may leave the device's name empty (ANGLE's adapter does): name it by what is known.
    var device = i.device || i.description || [i.vendor, i.architecture].filter(Boolean).join(' ') ||
                 'WebGPU adapter';
    var fields = [i.vendor, i.architecture, device, i.description];
    for (var k = 0; k < 4; ++k) HEAPU32[(strings >> 2) + k] = WGT.cstr(fields[k] || '');
    HEAPU32[numbers >> 2] = 2;                                // WGPUBackendType_WebGPU
    HEAPU32[(numbers >> 2) + 1] = WGT.software(a) ? 3 : 4;    // CPU, or unknown
    HEAPU32[(numbers >> 2) + 2] = i.subgroupMinSize || 0;
    HEAPU32[(numbers >> 2) + 3] = i.subgroupMaxSize || 0;
  },

  wgtrain_js_limits__deps: ['$WGT'],
  wgtrain_js_limits: function(id, out) {
    var l = WGT.get(id).limits;
    for (var k = 0; k < WGT.limit_names.length; ++k) {
      var v = l[WGT.limit_names[k]];
      HEAPF64[(out >> 3) + k] = typeof v === 'number' ? v : 0;
    }
  },

  wgtrain_js_features__deps: ['$WGT'],
  wgtrain_js_features: function(id, out, capacity) {
    var n = 0;
    WGT.get(id).features.forEach(function(name) {
      var v = WGT.features[name];
      if (v !== undefined && n < capacity) HEAPU32[(out >> 2) + n++] = v;
    });
    return n;
  },

  wgtrain_js_request_device__deps: ['$WGT'],
  wgtrain_js_request_device: function(id, features, count, limits, label, token, lost_token, error_token) {
    var a = WGT.get(id);
    var names = {};
    for (var name in WGT.features) names[WGT.features[name]] = name;
    var desc = {label: WGT.str(label), requiredFeatures: [], requiredLimits: {}};
    for (var k = 0; k < count; ++k) {
      var f = names[HEAPU32[(features >> 2) + k]];
      if (f && a.features.has(f)) desc.requiredFeatures.push(f);
    }
    if (limits) {
      for (var j = 0; j < WGT.limit_names.length; ++j) {
        var n = WGT.limit_names[j];
        var v = HEAPF64[(limits >> 3) + j];
        // Only limits this browser knows, and never past what the adapter offers.
        if (v > 0 && typeof a.limits[n] === 'number') desc.requiredLimits[n] = v;
      }
    }
    a.requestDevice(desc).then(function(d) {
      var handle = WGT.add(d);
      d.__queue = WGT.add(d.queue);
      if (error_token) {
        d.onuncapturederror = function(ev) {
          WGT.settle(error_token, 0, handle, WGT.error_type(ev.error), ev.error.message);
        };
      }
      if (lost_token) {
        d.lost.then(function(info) {
          WGT.settle(lost_token, info.reason === 'destroyed' ? 2 : 1, handle, 0, info.message);
        });
      }
      WGT.settle(token, 1, handle, 0, null);
    }, function(e) { WGT.settle(token, 3, 0, 0, String(e && e.message || e)); });
  },

  wgtrain_js_device_queue__deps: ['$WGT'],
  wgtrain_js_device_queue: function(id) { return WGT.get(id).__queue; },

  wgtrain_js_create_buffer__deps: ['$WGT'],
  wgtrain_js_create_buffer: function(id, label, usage, size, mapped) {
    return WGT.add(WGT.get(id).createBuffer({label: WGT.str(label), usage: usage, size: size,
                                             mappedAtCreation: !!mapped}));
  },

  wgtrain_js_create_shader_module__deps: ['$WGT'],
  wgtrain_js_create_shader_module: function(id, label, code, len) {
    return WGT.add(WGT.get(id).createShaderModule({label: WGT.str(label), code: UTF8ToString(code, len)}));
  },

  wgtrain_js_create_compute_pipeline__deps: ['$WGT'],
  wgtrain_js_create_compute_pipeline: function(id, label, layout, module, entry, keys, values, count) {
    var compute = {module: WGT.get(module), entryPoint: WGT.str(entry)};
    if (count) {
      compute.constants = {};
      for (var k = 0, p = keys; k < count; ++k) {
        var key = UTF8ToString(p);
        compute.constants[key] = HEAPF64[(values >> 3) + k];
        p += lengthBytesUTF8(key) + 1;
      }
    }
    return WGT.add(WGT.get(id).createComputePipeline({label: WGT.str(label),
                                                      layout: layout ? WGT.get(layout) : 'auto',
                                                      compute: compute}));
  },

  wgtrain_js_pipeline_layout__deps: ['$WGT'],
  wgtrain_js_pipeline_layout: function(id, group) { return WGT.add(WGT.get(id).getBindGroupLayout(group)); },

  wgtrain_js_create_bind_group__deps: ['$WGT'],
  wgtrain_js_create_bind_group: function(id, label, layout, count, bindings, buffers, offsets, sizes) {
    var entries = [];
    for (var k = 0; k < count; ++k) {
      var resource = {buffer: WGT.get(HEAPU32[(buffers >> 2) + k]), offset: HEAPF64[(offsets >> 3) + k]};
      var size = HEAPF64[(sizes >> 3) + k];
      if (size >= 0) resource.size = size;
      entries.push({binding: HEAPU32[(bindings >> 2) + k], resource: resource});
    }
    return WGT.add(WGT.get(id).createBindGroup({label: WGT.str(label), layout: WGT.get(layout), entries: entries}));
  },

  wgtrain_js_create_command_encoder__deps: ['$WGT'],
  wgtrain_js_create_command_encoder: function(id, label) {
    return WGT.add(WGT.get(id).createCommandEncoder({label: WGT.str(label)}));
  },

  wgtrain_js_create_query_set__deps: ['$WGT'],
  wgtrain_js_create_query_set: function(id, label, type, count) {
    return WGT.add(WGT.get(id).createQuerySet({label: WGT.str(label), type: type === 2 ? 'timestamp' : 'occlusion',
                                               count: count}));
  },

  wgtrain_js_push_error_scope__deps: ['$WGT'],
  wgtrain_js_push_error_scope: function(id, filter) {
    WGT.get(id).pushErrorScope(filter === 2 ? 'out-of-memory' : filter === 3 ? 'internal' : 'validation');
  },

  wgtrain_js_pop_error_scope__deps: ['$WGT'],
  wgtrain_js_pop_error_scope: function(id, token) {
    WGT.get(id).popErrorScope().then(function(e) {
      WGT.settle(token, 1, 0, WGT.error_type(e), e ? e.message : null);
    }, function(e) { WGT.settle(token, 3, 0, 5, String(e && e.message || e)); });
  },

  wgtrain_js_device_destroy__deps: ['$WGT'],
  wgtrain_js_device_destroy: function(id) { WGT.get(id).destroy(); },

  wgtrain_js_queue_write__deps: ['$WGT'],
  wgtrain_js_queue_write: function(queue, buffer, offset, data, size) {
    WGT.get(queue).writeBuffer(WGT.get(buffer), offset, HEAPU8, data, size);
  },

  wgtrain_js_queue_submit__deps: ['$WGT'],
  wgtrain_js_queue_submit: function(queue, count, buffers) {
    var list = [];
    for (var k = 0; k < count; ++k) list.push(WGT.get(HEAPU32[(buffers >> 2) + k]));
    WGT.get(queue).submit(list);
  },

  wgtrain_js_queue_done__deps: ['$WGT'],
  wgtrain_js_queue_done: function(queue, token) {
    WGT.get(queue).onSubmittedWorkDone().then(function() { WGT.settle(token, 1, 0, 0, null); },
                                              function(e) { WGT.settle(token, 3, 0, 0, String(e && e.message || e)); });
  },

  wgtrain_js_buffer_map__deps: ['$WGT'],
  wgtrain_js_buffer_map: function(id, mode, offset, size, token) {
    var b = WGT.get(id);
    var p = size >= 0 ? b.mapAsync(mode, offset, size) : b.mapAsync(mode, offset);
    p.then(function() { WGT.settle(token, 1, 0, 0, null); },
           function(e) { WGT.settle(token, 3, 0, 0, String(e && e.message || e)); });
  },

  wgtrain_js_buffer_mapped_range__deps: ['$WGT'],
  wgtrain_js_buffer_mapped_range: function(id, offset, size) {
    var b = WGT.get(id);
    var range = size >= 0 ? b.getMappedRange(offset, size) : b.getMappedRange(offset);
    var p = _malloc(range.byteLength);
    HEAPU8.set(new Uint8Array(range), p);
    (b.__copies = b.__copies || []).push(p);
    return p;
  },

  wgtrain_js_buffer_unmap__deps: ['$WGT'],
  wgtrain_js_buffer_unmap: function(id) {
    var b = WGT.get(id);
    b.unmap();
    (b.__copies || []).forEach(function(p) { _free(p); });
    b.__copies = [];
  },

  wgtrain_js_buffer_destroy__deps: ['$WGT'],
  wgtrain_js_buffer_destroy: function(id) { WGT.get(id).destroy(); },

  wgtrain_js_begin_compute_pass__deps: ['$WGT'],
  wgtrain_js_begin_compute_pass: function(id, label, query_set, begin, end) {
    var desc = {label: WGT.str(label)};
    if (query_set) {
      desc.timestampWrites = {querySet: WGT.get(query_set)};
      if (begin !== 0xFFFFFFFF) desc.timestampWrites.beginningOfPassWriteIndex = begin;
      if (end !== 0xFFFFFFFF) desc.timestampWrites.endOfPassWriteIndex = end;
    }
    return WGT.add(WGT.get(id).beginComputePass(desc));
  },

  wgtrain_js_copy_buffer__deps: ['$WGT'],
  wgtrain_js_copy_buffer: function(id, src, src_offset, dst, dst_offset, size) {
    WGT.get(id).copyBufferToBuffer(WGT.get(src), src_offset, WGT.get(dst), dst_offset, size);
  },

  wgtrain_js_resolve_query_set__deps: ['$WGT'],
  wgtrain_js_resolve_query_set: function(id, query_set, first, count, dst, dst_offset) {
    WGT.get(id).resolveQuerySet(WGT.get(query_set), first, count, WGT.get(dst), dst_offset);
  },

  wgtrain_js_finish__deps: ['$WGT'],
  wgtrain_js_finish: function(id, label) { return WGT.add(WGT.get(id).finish({label: WGT.str(label)})); },

  wgtrain_js_pass_set_pipeline__deps: ['$WGT'],
  wgtrain_js_pass_set_pipeline: function(id, pipeline) { WGT.get(id).setPipeline(WGT.get(pipeline)); },

  wgtrain_js_pass_set_bind_group__deps: ['$WGT'],
  wgtrain_js_pass_set_bind_group: function(id, index, group, count, offsets) {
    var dynamic = [];
    for (var k = 0; k < count; ++k) dynamic.push(HEAPU32[(offsets >> 2) + k]);
    WGT.get(id).setBindGroup(index, WGT.get(group), dynamic);
  },

  wgtrain_js_pass_dispatch__deps: ['$WGT'],
  wgtrain_js_pass_dispatch: function(id, x, y, z) { WGT.get(id).dispatchWorkgroups(x, y, z); },

  wgtrain_js_pass_end__deps: ['$WGT'],
  wgtrain_js_pass_end: function(id) { WGT.get(id).end(); },

  wgtrain_js_query_set_destroy__deps: ['$WGT'],
  wgtrain_js_query_set_destroy: function(id) { WGT.get(id).destroy(); },

  wgtrain_js_wait_events__deps: ['$WGT'],
  wgtrain_js_wait_events: function() {
    // Always through handleSleep, even with events waiting: it is also where a resumed module finishes rewinding.
    return Asyncify.handleSleep(function(wakeUp) {
      if (WGT.events.length) wakeUp();
      else WGT.wake = wakeUp;
    });
  },

  wgtrain_js_take_event__deps: ['$WGT'],
  wgtrain_js_take_event: function(status, handle, type, message) {
    var e = WGT.events.shift();
    if (!e) return 0;
    HEAPU32[status >> 2] = e.status;
    HEAPU32[handle >> 2] = e.handle;
    HEAPU32[type >> 2] = e.type;
    HEAPU32[message >> 2] = e.message ? WGT.cstr(e.message) : 0;
    return e.token;
  },
});
