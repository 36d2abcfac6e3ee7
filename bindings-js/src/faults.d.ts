export type HostFaultCode = 'ENGINE_TRAP' | 'ENGINE_LIMIT' | 'ENGINE_OUT_OF_MEMORY' | 'INPUT_TOO_LARGE';
/** The decisions a host builds itself (SPEC §7), exact bytes. */
export const HOST_FAULTS: Readonly<Record<HostFaultCode, string>>;
/** Calls and contexts over this many bytes (4 MiB) never reach the component. */
export const MAX_INPUT_BYTES: 4194304;
