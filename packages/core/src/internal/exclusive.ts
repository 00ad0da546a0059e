type KeysOfUnion<T> = T extends unknown ? keyof T : never

/**
 * Each member of the union `T`, where the fields only other members carry are declared absent, so
 * that any field can be read on any member (`undefined` where its member never carries it).
 *
 * @since 0.1.0
 */
export type Exclusive<T, Keys extends PropertyKey = KeysOfUnion<T>> = T extends unknown
  ? T & { readonly [K in Exclude<Keys, keyof T>]?: undefined }
  : never
