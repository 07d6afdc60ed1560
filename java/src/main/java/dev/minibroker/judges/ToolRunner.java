package dev.minibroker.judges;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.Exit;

/**
 * Runs several of Kafka's command-line tools, one after the other, in one JVM: a tool
 * call costs its own work, not a JVM start and the loading of Kafka's classes.
 *
 * <p>Usage: {@code ToolRunner CALLS.json RESULTS.json}. CALLS is a JSON list of
 * {@code {"name", "class", "args": [...], "stdin": "..."}}; RESULTS gets one
 * {@code {"name", "exit", "stdout", "stderr", "millis"}} per call, in order, written
 * after each call (a hung call leaves the earlier results readable).
 *
 * <p>How: each call's {@code main} runs with System.in fed from its "stdin" and
 * System.out / System.err captured. The streams are swapped inside one PrintStream that
 * is installed before any Scala class loads, so Scala's Console (which copies
 * System.out once) prints into the capture too. A tool's first {@code Exit.exit(code)}
 * is its exit status: it ends the capture and throws, so the tool's finally blocks still
 * close its clients; what a tool's catch-all prints about that exception afterwards
 * (several catch Throwable) is not the tool's output and is dropped. A tool that returns
 * normally without calling Exit exited 0.
 */
public final class ToolRunner {
    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    /** An OutputStream whose target is swapped for each call. */
    private static final class Switch extends OutputStream {
        volatile OutputStream target;

        Switch(OutputStream target) {
            this.target = target;
        }

        @Override
        public void write(int b) throws java.io.IOException {
            target.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            target.write(b, off, len);
        }
    }

    private static final OutputStream DROPPED = OutputStream.nullOutputStream();
    private static final Switch OUT = new Switch(System.out);
    private static final Switch ERR = new Switch(System.err);
    private static volatile Integer exitCode; // the current call's first Exit.exit

    private static void exit(int code) {
        if (exitCode == null) {
            exitCode = code;
            OUT.target = DROPPED;
            ERR.target = DROPPED;
        }
        throw new ToolExit(code);
    }

    public static void main(String[] argv) throws Exception {
        Switch out = OUT;
        Switch err = ERR;
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        Exit.setExitProcedure((code, message) -> exit(code));
        Exit.setHaltProcedure((code, message) -> exit(code));
        ObjectMapper json = new ObjectMapper();
        JsonNode calls = json.readTree(new File(argv[0]));
        ArrayNode results = json.createArrayNode();
        for (JsonNode call : calls) {
            ByteArrayOutputStream stdout = new ByteArrayOutputStream();
            ByteArrayOutputStream stderr = new ByteArrayOutputStream();
            String stdin = call.path("stdin").asText("");
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            String[] args = new String[call.path("args").size()];
            for (int i = 0; i < args.length; i++) {
                args[i] = call.path("args").get(i).asText();
            }
            long started = System.nanoTime();
            out.target = stdout;
            err.target = stderr;
            exitCode = null;
            int code;
            try {
                code = run(call.path("class").asText(), args);
            } finally {
                System.out.flush();
                System.err.flush();
                out.target = new java.io.FileOutputStream(java.io.FileDescriptor.out);
                err.target = new java.io.FileOutputStream(java.io.FileDescriptor.err);
            }
            ObjectNode result = results.addObject();
            result.put("name", call.path("name").asText());
            result.put("exit", code);
            result.put("stdout", stdout.toString(StandardCharsets.UTF_8));
            result.put("stderr", stderr.toString(StandardCharsets.UTF_8));
            result.put("millis", (System.nanoTime() - started) / 1_000_000);
            json.writerWithDefaultPrettyPrinter().writeValue(new File(argv[1]), results);
        }
        System.exit(0); // tools may leave non-daemon threads behind
    }

    private static int run(String className, String[] args) {
        try {
            Method main = Class.forName(className).getMethod("main", String[].class);
            main.invoke(null, (Object) args);
            return exitCode == null ? 0 : exitCode;
        } catch (InvocationTargetException exc) {
            if (exitCode != null) {
                return exitCode;
            }
            exc.getCause().printStackTrace();
            return 255;
        } catch (ReflectiveOperationException exc) {
            exc.printStackTrace();
            return 254;
        }
    }
}
