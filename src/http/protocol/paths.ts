/** Where the public API lives: every route of the partners' API is under this path. */
export const BASE_PATH = '/public/v1';
export const TOKEN_PATH = `${BASE_PATH}/auth/token`;
export const OPENAPI_PATH = `${BASE_PATH}/openapi.json`;
/** The token endpoint's own body limit (data requests have PUBLIC_API_BODY_LIMIT_BYTES). */
export const TOKEN_BODY_LIMIT_BYTES = 16 * 1024;
