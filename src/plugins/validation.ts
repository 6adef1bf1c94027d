import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler';

/**
 * Fastify's request validators (Ajv), compiled on a route's first request instead of at start.
 *
 * Cairn declares params, query or body schemas on about 330 routes. Compiled at start, their
 * generated code and closures hold about 3 MB of heap for the life of the process, and compiling
 * them takes a good part of every start, while most servers only ever see a fraction of the
 * routes. Each validator is compiled by Fastify's own compiler (the same Ajv options, formats and
 * shared schemas) the first time its route needs it, then reused.
 *
 * `controller` is Fastify's `schemaController` option. `compileAll` compiles every validator not
 * compiled yet, for the test that makes sure none is broken (app.compileAllValidators).
 */
type Validator = ((data: unknown, ctx?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown };
type RouteSchema = { schema: unknown; method: string; url: string; httpPart?: string };

declare module 'fastify' {
  interface FastifyInstance {
    /** Compiles every request validator not compiled yet; returns how many it compiled. */
    compileAllValidators(): number;
  }
}

export function lazyValidation() {
  const pending = new Set<() => Validator>();
  const buildFromPool = AjvCompiler() as unknown as (externalSchemas: unknown, options: unknown) => (route: RouteSchema) => Validator;

  function lazy(compile: () => Validator): Validator {
    let compiled: Validator | null = null;
    const get = () => {
      if (!compiled) {
        compiled = compile();
        pending.delete(get);
      }
      return compiled;
    };
    pending.add(get);
    const validate: Validator = (data, ctx) => {
      const fn = get();
      const ok = fn(data, ctx);
      validate.errors = fn.errors;
      return ok;
    };
    validate.errors = null;
    // Fastify passes the parent object (so Ajv may coerce a root value) only to validators that
    // have this property, which every validator Ajv compiles has.
    validate.schemaEnv = true;
    return validate;
  }

  function buildValidator(externalSchemas: unknown, options: unknown) {
    const compile = buildFromPool(externalSchemas, options);
    return (route: RouteSchema) => lazy(() => compile(route));
  }

  return {
    controller: { compilersFactory: { buildValidator: buildValidator as unknown as ValidatorFactory } },
    compileAll(): number {
      let n = 0;
      for (const get of [...pending]) {
        get();
        n++;
      }
      return n;
    },
  };
}
