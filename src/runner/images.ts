// Container images for jobs (`image:`, `services:`): names, registry credentials, pull, unpack
// and the cache of unpacked root filesystems. The parts live in ./images/; README.md, "Images".
export { ImageError, parseImageRef, pullName, familiarRepository, isLoopbackRegistry } from './images/ref.js';
export type { ImageRef, ImageErrorReason } from './images/ref.js';
export { credentialsFor, registryPath } from './images/credentials.js';
export type { RegistryCredential } from './images/credentials.js';
export { ImageStore, parsePullPolicies, hostPlatform } from './images/store.js';
export type { ImageConfig, PreparedImage, ImageStoreOptions, PullPolicy } from './images/store.js';
export { detectImageSupport } from './images/tools.js';
export type { ImageSupport } from './images/tools.js';
export { imageCacheDir } from './images/settings.js';
