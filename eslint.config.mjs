// Lint and format, modelled on the Effect repository's own config: eslint:recommended,
// typescript-eslint's recommended rules, and dprint (through @effect/eslint-plugin) as the formatter,
// so `npm run lint:fix` formats the tree. Only rules that need no type information, so a run needs
// no tsconfig project service and stays fast.
import * as effectEslint from "@effect/eslint-plugin"
import js from "@eslint/js"
import { defineConfig } from "eslint/config"
import globals from "globals"
import tseslint from "typescript-eslint"

export default defineConfig(
  {
    ignores: ["**/dist", "**/build", "**/node_modules", "**/*.md"]
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  effectEslint.configs.dprint,
  {
    languageOptions: {
      parser: tseslint.parser,
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.node }
    },
    rules: {
      "no-fallthrough": "off",
      "object-shorthand": "error",
      // Effect.gen bodies may not yield (a generator for its shape), as in the Effect repository.
      "require-yield": "off",
      "prefer-rest-params": "off",
      "prefer-spread": "off",
      // The gate refuses control characters in calls, keys and terminal output on purpose: its
      // regular expressions name them.
      "no-control-regex": "off",
      "@typescript-eslint/array-type": ["warn", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-unsafe-function-type": "off",
      "@typescript-eslint/no-wrapper-object-types": "off",
      "@typescript-eslint/no-array-constructor": "off",
      "@typescript-eslint/consistent-type-imports": "warn",
      // A ternary statement that picks between two calls (`ok ? resolve(a) : reject(b)`) is meant.
      "@typescript-eslint/no-unused-expressions": ["error", { allowTernary: true, allowShortCircuit: true }],
      "@typescript-eslint/no-unused-vars": ["error", {
        argsIgnorePattern: "^_",
        varsIgnorePattern: "^_",
        caughtErrorsIgnorePattern: "^_",
        destructuredArrayIgnorePattern: "^_"
      }],
      "@typescript-eslint/ban-ts-comment": "off",
      "@typescript-eslint/no-namespace": "off",
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth: 120,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force"
        }
      }]
    }
  },
  {
    // Library code writes through Effect's Console or its logger, never straight to the process.
    files: ["packages/*/src/**/*"],
    rules: {
      "no-console": "error"
    }
  },
  {
    // The web console is plain JavaScript modules served as they are to the browser: browser globals, no build.
    files: ["packages/server/src/console/**/*.js"],
    languageOptions: {
      sourceType: "module",
      globals: { ...globals.browser }
    },
    rules: {
      "no-console": "off"
    }
  }
)
