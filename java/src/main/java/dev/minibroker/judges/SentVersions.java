package dev.minibroker.judges;

import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.log4j.AppenderSkeleton;
import org.apache.log4j.Level;
import org.apache.log4j.Logger;
import org.apache.log4j.spi.LoggingEvent;

/**
 * The versions of one API the Java client in this JVM sent, read from its own NetworkClient
 * DEBUG line for every request ("Sending FETCH request with header RequestHeader(apiKey=FETCH,
 * apiVersion=17, ...)"): which version the client picked from the broker's ApiVersions answer
 * is what this shows, as the client saw it, with nothing else of its logging let through.
 */
final class SentVersions extends AppenderSkeleton {
    private final Pattern sent;
    private final Set<Integer> versions = new TreeSet<>();

    private SentVersions(String apiKey) {
        sent = Pattern.compile("Sending " + apiKey + " request with header RequestHeader\\(apiKey="
                + apiKey + ", apiVersion=(\\d+)");
    }

    /** Start watching the requests of {@code apiKey} (Kafka's enum name: FETCH, PRODUCE...). */
    static SentVersions watch(String apiKey) {
        SentVersions appender = new SentVersions(apiKey);
        Logger logger = Logger.getLogger("org.apache.kafka.clients.NetworkClient");
        logger.setLevel(Level.DEBUG);
        logger.setAdditivity(false); // the DEBUG lines stay off stderr
        logger.addAppender(appender);
        return appender;
    }

    /** The versions seen so far, lowest first. */
    synchronized Set<Integer> versions() {
        return new TreeSet<>(versions);
    }

    @Override
    protected synchronized void append(LoggingEvent event) {
        Matcher found = sent.matcher(event.getRenderedMessage());
        if (found.find()) {
            versions.add(Integer.parseInt(found.group(1)));
        }
    }

    @Override
    public void close() {}

    @Override
    public boolean requiresLayout() {
        return false;
    }
}
