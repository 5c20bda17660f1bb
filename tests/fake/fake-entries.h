/* fake-entries: the one list of every CUDA entry point the fake exports.
 *
 * FAKE_ENTRY_POINTS(X) calls X(base, version, suffix, exported) once per
 * exported function:
 *   base      the name cuGetProcAddress is asked for ("cuMemAlloc")
 *   version   the CUDA version at which this ABI appears, as in the
 *             PFN_<base>_v<version>[_ptds|_ptsz] typedefs of cudaTypedefs.h
 *   suffix    empty, or _ptds / _ptsz for the per-thread-default-stream variant
 *   exported  the symbol the fake exports for it
 * The same list gives the call counters (fakecuda_calls) and the
 * cuGetProcAddress table; test-fake.c checks every row against its PFN typedef
 * at compile time (a wrong version or signature does not compile). Each
 * exported name appears exactly once. No state, no locking: a pure list.
 */
#pragma once

#define FAKE_ENTRY_POINTS(X) \
	/* errors, init, version, lookup */ \
	X(cuGetErrorString, 6000, , cuGetErrorString) \
	X(cuGetErrorName, 6000, , cuGetErrorName) \
	X(cuInit, 2000, , cuInit) \
	X(cuDriverGetVersion, 2020, , cuDriverGetVersion) \
	X(cuGetExportTable, 3000, , cuGetExportTable) \
	X(cuGetProcAddress, 11030, , cuGetProcAddress) \
	X(cuGetProcAddress, 12000, , cuGetProcAddress_v2) \
	/* devices */ \
	X(cuDeviceGet, 2000, , cuDeviceGet) \
	X(cuDeviceGetCount, 2000, , cuDeviceGetCount) \
	X(cuDeviceGetName, 2000, , cuDeviceGetName) \
	X(cuDeviceGetUuid, 9020, , cuDeviceGetUuid) \
	X(cuDeviceGetUuid, 11040, , cuDeviceGetUuid_v2) \
	X(cuDeviceTotalMem, 2000, , cuDeviceTotalMem) \
	X(cuDeviceTotalMem, 3020, , cuDeviceTotalMem_v2) \
	X(cuDeviceGetAttribute, 2000, , cuDeviceGetAttribute) \
	X(cuDeviceGetPCIBusId, 4010, , cuDeviceGetPCIBusId) \
	X(cuDeviceGetByPCIBusId, 4010, , cuDeviceGetByPCIBusId) \
	/* primary contexts */ \
	X(cuDevicePrimaryCtxRetain, 7000, , cuDevicePrimaryCtxRetain) \
	X(cuDevicePrimaryCtxRelease, 7000, , cuDevicePrimaryCtxRelease) \
	X(cuDevicePrimaryCtxRelease, 11000, , cuDevicePrimaryCtxRelease_v2) \
	X(cuDevicePrimaryCtxReset, 7000, , cuDevicePrimaryCtxReset) \
	X(cuDevicePrimaryCtxReset, 11000, , cuDevicePrimaryCtxReset_v2) \
	X(cuDevicePrimaryCtxSetFlags, 7000, , cuDevicePrimaryCtxSetFlags) \
	X(cuDevicePrimaryCtxSetFlags, 11000, , cuDevicePrimaryCtxSetFlags_v2) \
	X(cuDevicePrimaryCtxGetState, 7000, , cuDevicePrimaryCtxGetState) \
	/* contexts */ \
	X(cuCtxCreate, 2000, , cuCtxCreate) \
	X(cuCtxCreate, 3020, , cuCtxCreate_v2) \
	X(cuCtxCreate, 11040, , cuCtxCreate_v3) \
	X(cuCtxCreate, 12050, , cuCtxCreate_v4) \
	X(cuCtxDestroy, 2000, , cuCtxDestroy) \
	X(cuCtxDestroy, 4000, , cuCtxDestroy_v2) \
	X(cuCtxPushCurrent, 2000, , cuCtxPushCurrent) \
	X(cuCtxPushCurrent, 4000, , cuCtxPushCurrent_v2) \
	X(cuCtxPopCurrent, 2000, , cuCtxPopCurrent) \
	X(cuCtxPopCurrent, 4000, , cuCtxPopCurrent_v2) \
	X(cuCtxSetCurrent, 4000, , cuCtxSetCurrent) \
	X(cuCtxGetCurrent, 4000, , cuCtxGetCurrent) \
	X(cuCtxGetDevice, 2000, , cuCtxGetDevice) \
	X(cuCtxGetDevice, 13000, , cuCtxGetDevice_v2) \
	X(cuCtxSynchronize, 2000, , cuCtxSynchronize) \
	X(cuCtxSynchronize, 13000, , cuCtxSynchronize_v2) \
	/* device memory */ \
	X(cuMemGetInfo, 2000, , cuMemGetInfo) \
	X(cuMemGetInfo, 3020, , cuMemGetInfo_v2) \
	X(cuMemAlloc, 2000, , cuMemAlloc) \
	X(cuMemAlloc, 3020, , cuMemAlloc_v2) \
	X(cuMemAllocPitch, 2000, , cuMemAllocPitch) \
	X(cuMemAllocPitch, 3020, , cuMemAllocPitch_v2) \
	X(cuMemAllocManaged, 6000, , cuMemAllocManaged) \
	X(cuMemFree, 2000, , cuMemFree) \
	X(cuMemFree, 3020, , cuMemFree_v2) \
	X(cuMemGetAddressRange, 2000, , cuMemGetAddressRange) \
	X(cuMemGetAddressRange, 3020, , cuMemGetAddressRange_v2) \
	X(cuPointerGetAttribute, 4000, , cuPointerGetAttribute) \
	X(cuPointerGetAttributes, 7000, , cuPointerGetAttributes) \
	/* host memory */ \
	X(cuMemAllocHost, 2000, , cuMemAllocHost) \
	X(cuMemAllocHost, 3020, , cuMemAllocHost_v2) \
	X(cuMemHostAlloc, 2020, , cuMemHostAlloc) \
	X(cuMemFreeHost, 2000, , cuMemFreeHost) \
	/* copies and sets */ \
	X(cuMemcpy, 4000, , cuMemcpy) \
	X(cuMemcpy, 7000, _ptds, cuMemcpy_ptds) \
	X(cuMemcpyAsync, 4000, , cuMemcpyAsync) \
	X(cuMemcpyAsync, 7000, _ptsz, cuMemcpyAsync_ptsz) \
	X(cuMemcpyHtoD, 2000, , cuMemcpyHtoD) \
	X(cuMemcpyHtoD, 3020, , cuMemcpyHtoD_v2) \
	X(cuMemcpyHtoD, 7000, _ptds, cuMemcpyHtoD_v2_ptds) \
	X(cuMemcpyDtoH, 2000, , cuMemcpyDtoH) \
	X(cuMemcpyDtoH, 3020, , cuMemcpyDtoH_v2) \
	X(cuMemcpyDtoH, 7000, _ptds, cuMemcpyDtoH_v2_ptds) \
	X(cuMemcpyDtoD, 2000, , cuMemcpyDtoD) \
	X(cuMemcpyDtoD, 3020, , cuMemcpyDtoD_v2) \
	X(cuMemcpyDtoD, 7000, _ptds, cuMemcpyDtoD_v2_ptds) \
	X(cuMemcpyHtoDAsync, 2000, , cuMemcpyHtoDAsync) \
	X(cuMemcpyHtoDAsync, 3020, , cuMemcpyHtoDAsync_v2) \
	X(cuMemcpyHtoDAsync, 7000, _ptsz, cuMemcpyHtoDAsync_v2_ptsz) \
	X(cuMemcpyDtoHAsync, 2000, , cuMemcpyDtoHAsync) \
	X(cuMemcpyDtoHAsync, 3020, , cuMemcpyDtoHAsync_v2) \
	X(cuMemcpyDtoHAsync, 7000, _ptsz, cuMemcpyDtoHAsync_v2_ptsz) \
	X(cuMemcpyDtoDAsync, 3000, , cuMemcpyDtoDAsync) \
	X(cuMemcpyDtoDAsync, 3020, , cuMemcpyDtoDAsync_v2) \
	X(cuMemcpyDtoDAsync, 7000, _ptsz, cuMemcpyDtoDAsync_v2_ptsz) \
	X(cuMemsetD8, 2000, , cuMemsetD8) \
	X(cuMemsetD8, 3020, , cuMemsetD8_v2) \
	X(cuMemsetD8, 7000, _ptds, cuMemsetD8_v2_ptds) \
	X(cuMemsetD32, 2000, , cuMemsetD32) \
	X(cuMemsetD32, 3020, , cuMemsetD32_v2) \
	X(cuMemsetD32, 7000, _ptds, cuMemsetD32_v2_ptds) \
	X(cuMemsetD8Async, 3020, , cuMemsetD8Async) \
	X(cuMemsetD8Async, 7000, _ptsz, cuMemsetD8Async_ptsz) \
	X(cuMemsetD32Async, 3020, , cuMemsetD32Async) \
	X(cuMemsetD32Async, 7000, _ptsz, cuMemsetD32Async_ptsz) \
	/* streams and events */ \
	X(cuStreamCreate, 2000, , cuStreamCreate) \
	X(cuStreamCreateWithPriority, 5050, , cuStreamCreateWithPriority) \
	X(cuGreenCtxStreamCreate, 12050, , cuGreenCtxStreamCreate) \
	X(cuStreamDestroy, 2000, , cuStreamDestroy) \
	X(cuStreamDestroy, 4000, , cuStreamDestroy_v2) \
	X(cuStreamSynchronize, 2000, , cuStreamSynchronize) \
	X(cuStreamSynchronize, 7000, _ptsz, cuStreamSynchronize_ptsz) \
	X(cuStreamQuery, 2000, , cuStreamQuery) \
	X(cuStreamQuery, 7000, _ptsz, cuStreamQuery_ptsz) \
	X(cuStreamGetCtx, 9020, , cuStreamGetCtx) \
	X(cuStreamGetCtx, 9020, _ptsz, cuStreamGetCtx_ptsz) \
	X(cuStreamWaitEvent, 3020, , cuStreamWaitEvent) \
	X(cuStreamWaitEvent, 7000, _ptsz, cuStreamWaitEvent_ptsz) \
	X(cuLaunchHostFunc, 10000, , cuLaunchHostFunc) \
	X(cuLaunchHostFunc, 10000, _ptsz, cuLaunchHostFunc_ptsz) \
	X(cuEventCreate, 2000, , cuEventCreate) \
	X(cuEventRecord, 2000, , cuEventRecord) \
	X(cuEventRecord, 7000, _ptsz, cuEventRecord_ptsz) \
	X(cuEventQuery, 2000, , cuEventQuery) \
	X(cuEventSynchronize, 2000, , cuEventSynchronize) \
	X(cuEventDestroy, 2000, , cuEventDestroy) \
	X(cuEventDestroy, 4000, , cuEventDestroy_v2) \
	/* stream-ordered pools */ \
	X(cuDeviceGetDefaultMemPool, 11020, , cuDeviceGetDefaultMemPool) \
	X(cuDeviceGetMemPool, 11020, , cuDeviceGetMemPool) \
	X(cuDeviceSetMemPool, 11020, , cuDeviceSetMemPool) \
	X(cuMemGetDefaultMemPool, 13000, , cuMemGetDefaultMemPool) \
	X(cuMemGetMemPool, 13000, , cuMemGetMemPool) \
	X(cuMemSetMemPool, 13000, , cuMemSetMemPool) \
	X(cuMemPoolCreate, 11020, , cuMemPoolCreate) \
	X(cuMemPoolDestroy, 11020, , cuMemPoolDestroy) \
	X(cuMemPoolTrimTo, 11020, , cuMemPoolTrimTo) \
	X(cuMemPoolSetAttribute, 11020, , cuMemPoolSetAttribute) \
	X(cuMemPoolGetAttribute, 11020, , cuMemPoolGetAttribute) \
	X(cuMemAllocAsync, 11020, , cuMemAllocAsync) \
	X(cuMemAllocAsync, 11020, _ptsz, cuMemAllocAsync_ptsz) \
	X(cuMemAllocFromPoolAsync, 11020, , cuMemAllocFromPoolAsync) \
	X(cuMemAllocFromPoolAsync, 11020, _ptsz, cuMemAllocFromPoolAsync_ptsz) \
	X(cuMemFreeAsync, 11020, , cuMemFreeAsync) \
	X(cuMemFreeAsync, 11020, _ptsz, cuMemFreeAsync_ptsz) \
	/* virtual memory management */ \
	X(cuMemGetAllocationGranularity, 10020, , cuMemGetAllocationGranularity) \
	X(cuMemCreate, 10020, , cuMemCreate) \
	X(cuMemRelease, 10020, , cuMemRelease) \
	X(cuMemAddressReserve, 10020, , cuMemAddressReserve) \
	X(cuMemAddressFree, 10020, , cuMemAddressFree) \
	X(cuMemMap, 10020, , cuMemMap) \
	X(cuMemUnmap, 10020, , cuMemUnmap) \
	X(cuMemSetAccess, 10020, , cuMemSetAccess) \
	X(cuMemGetAllocationPropertiesFromHandle, 10020, , cuMemGetAllocationPropertiesFromHandle) \
	X(cuMemRetainAllocationHandle, 11000, , cuMemRetainAllocationHandle) \
	X(cuMemExportToShareableHandle, 10020, , cuMemExportToShareableHandle) \
	X(cuMemImportFromShareableHandle, 10020, , cuMemImportFromShareableHandle) \
	/* arrays */ \
	X(cuArrayCreate, 2000, , cuArrayCreate) \
	X(cuArrayCreate, 3020, , cuArrayCreate_v2) \
	X(cuArray3DCreate, 2000, , cuArray3DCreate) \
	X(cuArray3DCreate, 3020, , cuArray3DCreate_v2) \
	X(cuArrayDestroy, 2000, , cuArrayDestroy) \
	X(cuMipmappedArrayCreate, 5000, , cuMipmappedArrayCreate) \
	X(cuMipmappedArrayDestroy, 5000, , cuMipmappedArrayDestroy) \
	/* IPC */ \
	X(cuIpcGetMemHandle, 4010, , cuIpcGetMemHandle) \
	X(cuIpcOpenMemHandle, 4010, , cuIpcOpenMemHandle) \
	X(cuIpcOpenMemHandle, 11000, , cuIpcOpenMemHandle_v2) \
	X(cuIpcCloseMemHandle, 4010, , cuIpcCloseMemHandle) \
	/* device queries programs make at start (fake-attr.c) */ \
	X(cuDeviceComputeCapability, 2000, , cuDeviceComputeCapability) \
	X(cuDeviceGetProperties, 2000, , cuDeviceGetProperties) \
	/* context settings, peer access, profiler, registered host memory (fake-misc.c) */ \
	X(cuCtxSetLimit, 3010, , cuCtxSetLimit) \
	X(cuCtxGetLimit, 3010, , cuCtxGetLimit) \
	X(cuCtxGetCacheConfig, 3020, , cuCtxGetCacheConfig) \
	X(cuCtxSetCacheConfig, 3020, , cuCtxSetCacheConfig) \
	X(cuCtxGetSharedMemConfig, 4020, , cuCtxGetSharedMemConfig) \
	X(cuCtxSetSharedMemConfig, 4020, , cuCtxSetSharedMemConfig) \
	X(cuDeviceCanAccessPeer, 4000, , cuDeviceCanAccessPeer) \
	X(cuCtxEnablePeerAccess, 4000, , cuCtxEnablePeerAccess) \
	X(cuCtxDisablePeerAccess, 4000, , cuCtxDisablePeerAccess) \
	X(cuDeviceGetP2PAttribute, 8000, , cuDeviceGetP2PAttribute) \
	X(cuProfilerStart, 4000, , cuProfilerStart) \
	X(cuProfilerStop, 4000, , cuProfilerStop) \
	X(cuMemHostRegister, 4000, , cuMemHostRegister) \
	X(cuMemHostRegister, 6050, , cuMemHostRegister_v2) \
	X(cuMemHostUnregister, 4000, , cuMemHostUnregister) \
	X(cuMemHostGetDevicePointer, 2020, , cuMemHostGetDevicePointer) \
	X(cuMemHostGetDevicePointer, 3020, , cuMemHostGetDevicePointer_v2) \
	/* stream callbacks and event timing (fake-stream.c) */ \
	X(cuStreamAddCallback, 5000, , cuStreamAddCallback) \
	X(cuStreamAddCallback, 7000, _ptsz, cuStreamAddCallback_ptsz) \
	X(cuEventElapsedTime, 2000, , cuEventElapsedTime) \
	X(cuEventElapsedTime, 12080, , cuEventElapsedTime_v2) \
	/* 2D and 3D copies (fake-copy.c) */ \
	X(cuMemcpy2D, 3020, , cuMemcpy2D_v2) \
	X(cuMemcpy2D, 7000, _ptds, cuMemcpy2D_v2_ptds) \
	X(cuMemcpy2DUnaligned, 3020, , cuMemcpy2DUnaligned_v2) \
	X(cuMemcpy2DUnaligned, 7000, _ptds, cuMemcpy2DUnaligned_v2_ptds) \
	X(cuMemcpy2DAsync, 3020, , cuMemcpy2DAsync_v2) \
	X(cuMemcpy2DAsync, 7000, _ptsz, cuMemcpy2DAsync_v2_ptsz) \
	X(cuMemcpy3D, 3020, , cuMemcpy3D_v2) \
	X(cuMemcpy3D, 7000, _ptds, cuMemcpy3D_v2_ptds) \
	X(cuMemcpy3DAsync, 3020, , cuMemcpy3DAsync_v2) \
	X(cuMemcpy3DAsync, 7000, _ptsz, cuMemcpy3DAsync_v2_ptsz) \
	/* modules, linking, launches, texture objects: no device code runs here (fake-module.c) */ \
	X(cuModuleLoad, 2000, , cuModuleLoad) \
	X(cuModuleLoadData, 2000, , cuModuleLoadData) \
	X(cuModuleLoadDataEx, 2010, , cuModuleLoadDataEx) \
	X(cuModuleLoadFatBinary, 2000, , cuModuleLoadFatBinary) \
	X(cuModuleUnload, 2000, , cuModuleUnload) \
	X(cuModuleGetFunction, 2000, , cuModuleGetFunction) \
	X(cuModuleGetGlobal, 2000, , cuModuleGetGlobal) \
	X(cuModuleGetGlobal, 3020, , cuModuleGetGlobal_v2) \
	X(cuLinkCreate, 5050, , cuLinkCreate) \
	X(cuLinkCreate, 6050, , cuLinkCreate_v2) \
	X(cuLinkAddData, 5050, , cuLinkAddData) \
	X(cuLinkAddData, 6050, , cuLinkAddData_v2) \
	X(cuLinkAddFile, 5050, , cuLinkAddFile) \
	X(cuLinkAddFile, 6050, , cuLinkAddFile_v2) \
	X(cuLinkComplete, 5050, , cuLinkComplete) \
	X(cuLinkDestroy, 5050, , cuLinkDestroy) \
	X(cuFuncGetAttribute, 2020, , cuFuncGetAttribute) \
	X(cuFuncSetAttribute, 9000, , cuFuncSetAttribute) \
	X(cuFuncSetCacheConfig, 3000, , cuFuncSetCacheConfig) \
	X(cuFuncSetSharedMemConfig, 4020, , cuFuncSetSharedMemConfig) \
	X(cuLaunchKernel, 4000, , cuLaunchKernel) \
	X(cuLaunchKernel, 7000, _ptsz, cuLaunchKernel_ptsz) \
	X(cuTexObjectCreate, 5000, , cuTexObjectCreate) \
	X(cuTexObjectDestroy, 5000, , cuTexObjectDestroy) \
	/* graphics interop: no graphics API here (fake-module.c) */ \
	X(cuGraphicsUnregisterResource, 3000, , cuGraphicsUnregisterResource) \
	X(cuGraphicsSubResourceGetMappedArray, 3000, , cuGraphicsSubResourceGetMappedArray) \
	X(cuGraphicsResourceGetMappedPointer, 3000, , cuGraphicsResourceGetMappedPointer) \
	X(cuGraphicsResourceGetMappedPointer, 3020, , cuGraphicsResourceGetMappedPointer_v2) \
	X(cuGraphicsResourceSetMapFlags, 3000, , cuGraphicsResourceSetMapFlags) \
	X(cuGraphicsResourceSetMapFlags, 6050, , cuGraphicsResourceSetMapFlags_v2) \
	X(cuGraphicsMapResources, 3000, , cuGraphicsMapResources) \
	X(cuGraphicsMapResources, 7000, _ptsz, cuGraphicsMapResources_ptsz) \
	X(cuGraphicsUnmapResources, 3000, , cuGraphicsUnmapResources) \
	X(cuGraphicsUnmapResources, 7000, _ptsz, cuGraphicsUnmapResources_ptsz) \
	X(cuGraphicsGLRegisterBuffer, 3000, , cuGraphicsGLRegisterBuffer) \
	X(cuGraphicsGLRegisterImage, 3000, , cuGraphicsGLRegisterImage) \
	X(cuGLGetDevices, 4010, , cuGLGetDevices) \
	X(cuGLGetDevices, 6050, , cuGLGetDevices_v2) \
	/* stream capture and the graphs it makes (fake-capture.c) */ \
	X(cuStreamBeginCapture, 10000, , cuStreamBeginCapture) \
	X(cuStreamBeginCapture, 10000, _ptsz, cuStreamBeginCapture_ptsz) \
	X(cuStreamBeginCapture, 10010, , cuStreamBeginCapture_v2) \
	X(cuStreamBeginCapture, 10010, _ptsz, cuStreamBeginCapture_v2_ptsz) \
	X(cuStreamBeginCaptureToGraph, 12030, , cuStreamBeginCaptureToGraph) \
	X(cuStreamBeginCaptureToGraph, 12030, _ptsz, cuStreamBeginCaptureToGraph_ptsz) \
	X(cuStreamEndCapture, 10000, , cuStreamEndCapture) \
	X(cuStreamEndCapture, 10000, _ptsz, cuStreamEndCapture_ptsz) \
	X(cuStreamIsCapturing, 10000, , cuStreamIsCapturing) \
	X(cuStreamIsCapturing, 10000, _ptsz, cuStreamIsCapturing_ptsz) \
	X(cuStreamGetCaptureInfo, 10010, , cuStreamGetCaptureInfo) \
	X(cuStreamGetCaptureInfo, 10010, _ptsz, cuStreamGetCaptureInfo_ptsz) \
	X(cuStreamGetCaptureInfo, 11030, , cuStreamGetCaptureInfo_v2) \
	X(cuStreamGetCaptureInfo, 11030, _ptsz, cuStreamGetCaptureInfo_v2_ptsz) \
	X(cuStreamGetCaptureInfo, 12030, , cuStreamGetCaptureInfo_v3) \
	X(cuStreamGetCaptureInfo, 12030, _ptsz, cuStreamGetCaptureInfo_v3_ptsz) \
	X(cuThreadExchangeStreamCaptureMode, 10010, , cuThreadExchangeStreamCaptureMode) \
	X(cuGraphCreate, 10000, , cuGraphCreate) \
	X(cuGraphDestroy, 10000, , cuGraphDestroy) \
	/* graph nodes, executable graphs, graph memory (fake-graph.c) */ \
	X(cuGraphAddEmptyNode, 10000, , cuGraphAddEmptyNode) \
	X(cuGraphAddChildGraphNode, 10000, , cuGraphAddChildGraphNode) \
	X(cuGraphChildGraphNodeGetGraph, 10000, , cuGraphChildGraphNodeGetGraph) \
	X(cuGraphAddMemAllocNode, 11040, , cuGraphAddMemAllocNode) \
	X(cuGraphMemAllocNodeGetParams, 11040, , cuGraphMemAllocNodeGetParams) \
	X(cuGraphAddMemFreeNode, 11040, , cuGraphAddMemFreeNode) \
	X(cuGraphMemFreeNodeGetParams, 11040, , cuGraphMemFreeNodeGetParams) \
	X(cuGraphAddNode, 12020, , cuGraphAddNode) \
	X(cuGraphAddNode, 12030, , cuGraphAddNode_v2) \
	X(cuGraphNodeGetType, 10000, , cuGraphNodeGetType) \
	X(cuGraphGetNodes, 10000, , cuGraphGetNodes) \
	X(cuGraphGetRootNodes, 10000, , cuGraphGetRootNodes) \
	X(cuGraphClone, 10000, , cuGraphClone) \
	X(cuGraphInstantiate, 10000, , cuGraphInstantiate) \
	X(cuGraphInstantiate, 11000, , cuGraphInstantiate_v2) \
	X(cuGraphInstantiateWithFlags, 11040, , cuGraphInstantiateWithFlags) \
	X(cuGraphInstantiateWithParams, 12000, , cuGraphInstantiateWithParams) \
	X(cuGraphInstantiateWithParams, 12000, _ptsz, cuGraphInstantiateWithParams_ptsz) \
	X(cuGraphUpload, 11010, , cuGraphUpload) \
	X(cuGraphUpload, 11010, _ptsz, cuGraphUpload_ptsz) \
	X(cuGraphLaunch, 10000, , cuGraphLaunch) \
	X(cuGraphLaunch, 10000, _ptsz, cuGraphLaunch_ptsz) \
	X(cuGraphExecDestroy, 10000, , cuGraphExecDestroy) \
	X(cuDeviceGraphMemTrim, 11040, , cuDeviceGraphMemTrim) \
	X(cuDeviceGetGraphMemAttribute, 11040, , cuDeviceGetGraphMemAttribute) \
	X(cuDeviceSetGraphMemAttribute, 11040, , cuDeviceSetGraphMemAttribute)
